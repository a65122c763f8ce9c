// AllreduceAcrossHosts (gloo_local.h): shm::Allreduce does the rounds within
// the host, and each round's slice of this local rank crosses hosts here, in
// one CollectiveScope for the whole allreduce (every rank draws one sequence
// number, whatever its slices).
#include <cstring>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_local.h"
#include "worker_runtime/gloo/gloo_op_support.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Pairwise among `members` (ring ranks, one per host; we are members[me]):
// each owns a part of the slice, gets every member's copy of it, folds them
// in member order and sends the result to every member. Not finished
// (kAverage stays a sum): shm::Allreduce divides by every host's ranks.
absl::Status AllreduceAmong(CollectiveScope& scope, const std::vector<int>& members, int me,
                            DType dtype, ReduceOp op, void* slice, int64_t count) {
  const int h = static_cast<int>(members.size());
  const size_t element = DTypeSize(dtype);
  const std::vector<int64_t> counts = EvenSplit(count, h);
  std::vector<PeerRegion> parts(h);
  size_t offset = 0;
  for (int p = 0; p < h; ++p) {
    parts[p] = PeerRegion{offset, static_cast<size_t>(counts[p]) * element};
    offset += parts[p].bytes;
  }
  const size_t own = parts[me].bytes;
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* data,
                        scope.Register(slice, count * element));
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch received, scope.RegisterScratch(h * own + 1));
  // Regions by ring rank: only the members' are non-empty.
  std::vector<PeerRegion> to(scope.size());
  std::vector<PeerRegion> from(scope.size());
  for (int p = 0; p < h; ++p) {
    to[members[p]] = parts[p];
    from[members[p]] = PeerRegion{p * own, own};
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(data, to, received.buffer, from, Channel::kData));
  uint8_t* result = Bytes(slice) + parts[me].offset;
  std::memcpy(received.data + me * own, result, own);
  std::memcpy(result, received.data, own);
  for (int p = 1; p < h; ++p) {
    ReduceInto(dtype, op, result, received.data + p * own, counts[me]);
  }
  for (int p = 0; p < h; ++p) {
    to[members[p]] = parts[me];
    from[members[p]] = parts[p];
  }
  return scope.ExchangeWithAll(data, to, data, from, Channel::kResult);
}

}  // namespace

absl::Status AllreduceAcrossHosts(GlooContext& context, LocalGroup& local, TensorView inout,
                                  const AllreduceOptions& options) {
  const std::string label = Label("allreduce", options.name);
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  shm::CrossReduce cross;
  cross.total_ranks = local.total_ranks;
  cross.run = [&](void* slice, int64_t count) {
    return AllreduceAmong(scope, local.cross_ranks, local.cross_index, inout.dtype, options.op,
                          slice, count);
  };
  return AfterLocal(context, shm::Allreduce(*local.group, inout, options,
                                            CollectiveDeadline(context), &cross));
}

}  // namespace horovodd::internal
