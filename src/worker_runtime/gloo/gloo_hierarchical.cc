// AllreduceAcrossHosts (gloo_local.h): shm::Allreduce does the rounds within
// the host, and each round's slice of this local rank crosses hosts here, in
// one CollectiveScope for the whole allreduce (every rank draws one sequence
// number, whatever its slices). The crossing is split in two (CrossHosts) so
// that shm::Allreduce reduces the next round within the host meanwhile.
#include <cstring>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_local.h"
#include "worker_runtime/gloo/gloo_op_support.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/tensor/copy_bytes.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Pairwise among `members` (ring ranks, one per host; we are members[me]):
// each owns a part of the slice, gets every member's copy of it, folds them
// in member order and sends the result to every member. Not finished
// (kAverage stays a sum): shm::Allreduce divides by every host's ranks.
// Start posts the copies of the parts; Finish waits for ours, folds them and
// shares the result. The slice is not written between the two.
class CrossHosts {
 public:
  CrossHosts(CollectiveScope& scope, const std::vector<int>& members, int me, DType dtype,
             ReduceOp op)
      : scope_(scope), members_(members), me_(me), dtype_(dtype), op_(op) {}

  absl::Status Start(void* slice, int64_t count) {
    const int h = static_cast<int>(members_.size());
    const size_t element = DTypeSize(dtype_);
    counts_ = EvenSplit(count, h);
    parts_.assign(h, PeerRegion{});
    size_t offset = 0;
    for (int p = 0; p < h; ++p) {
      parts_[p] = PeerRegion{offset, static_cast<size_t>(counts_[p]) * element};
      offset += parts_[p].bytes;
    }
    const size_t own = parts_[me_].bytes;
    slice_ = Bytes(slice);
    HVDD_ASSIGN_OR_RETURN(data_, scope_.Register(slice, count * element));
    HVDD_ASSIGN_OR_RETURN(received_, scope_.RegisterScratch(h * own + 1));
    // Regions by ring rank: only the members' are non-empty.
    std::vector<PeerRegion> to(scope_.size());
    std::vector<PeerRegion> from(scope_.size());
    for (int p = 0; p < h; ++p) {
      to[members_[p]] = parts_[p];
      from[members_[p]] = PeerRegion{p * own, own};
    }
    HVDD_ASSIGN_OR_RETURN(posted_,
                          scope_.PostExchange(data_, to, received_.buffer, from, Channel::kData));
    return absl::OkStatus();
  }

  absl::Status Finish() {
    HVDD_RETURN_IF_ERROR(scope_.WaitExchange(posted_));
    const int h = static_cast<int>(members_.size());
    const size_t own = parts_[me_].bytes;
    uint8_t* result = slice_ + parts_[me_].offset;
    CopyBytes(received_.data + me_ * own, result, own);
    CopyBytes(result, received_.data, own);
    for (int p = 1; p < h; ++p) {
      ReduceInto(dtype_, op_, result, received_.data + p * own, counts_[me_]);
    }
    std::vector<PeerRegion> to(scope_.size());
    std::vector<PeerRegion> from(scope_.size());
    for (int p = 0; p < h; ++p) {
      to[members_[p]] = parts_[me_];
      from[members_[p]] = parts_[p];
    }
    return scope_.ExchangeWithAll(data_, to, data_, from, Channel::kResult);
  }

 private:
  CollectiveScope& scope_;
  const std::vector<int>& members_;
  const int me_;
  const DType dtype_;
  const ReduceOp op_;
  // The crossing started last.
  uint8_t* slice_ = nullptr;
  std::vector<int64_t> counts_;
  std::vector<PeerRegion> parts_;
  gloo::transport::UnboundBuffer* data_ = nullptr;
  CollectiveScope::Scratch received_;
  CollectiveScope::PostedExchange posted_;
};

}  // namespace

absl::Status AllreduceAcrossHosts(GlooContext& context, LocalGroup& local, TensorView inout,
                                  const AllreduceOptions& options) {
  const std::string label = Label("allreduce", options.name);
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  CrossHosts hosts(scope, local.cross_ranks, local.cross_index, inout.dtype, options.op);
  shm::CrossReduce cross;
  cross.total_ranks = local.total_ranks;
  cross.start = [&](void* slice, int64_t count) { return hosts.Start(slice, count); };
  cross.finish = [&] { return hosts.Finish(); };
  return AfterLocal(context, shm::Allreduce(*local.group, inout, options,
                                            CollectiveDeadline(context), &cross));
}

}  // namespace horovodd::internal
