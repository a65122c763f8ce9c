#include "worker_runtime/hierarchical/hierarchical_communicator.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_own_parts.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Pieces the tensor crosses hosts in: one per this many bytes, at most
// kMaxCrossingPieces. While one piece crosses, the next is reduced within
// the host and the one before is shared, so on a link slower than the
// host's memory the work within the host hides under the crossing. Few and
// large: every crossing costs wake-ups of both ends' Gloo loop threads
// whatever its size.
constexpr size_t kCrossingPieceBytes = size_t{4} << 20;
constexpr int kMaxCrossingPieces = 4;

int CrossingPieces(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>(bytes / kCrossingPieceBytes, 1, kMaxCrossingPieces));
}

// One local rank's part of one piece, crossing hosts: pairwise among
// `members` (ring ranks, one per host; we are members[me]), in place on
// `part` (`count` elements). Each member owns a piece of it, gets every
// member's copy of its piece, folds them into its own, finishes the
// reduction (the postscale; kAverage: postscale / `total_ranks`) and
// sends the result to every member. Start posts every receive and then our
// copies; Fold waits for the others' copies, folds and sends the result;
// Finish waits for every result. Crossings of one scope match in the order
// they start (per peer and channel), the same on every rank.
class Crossing {
 public:
  Crossing(CollectiveScope& scope, const std::vector<int>& members, int me, void* part,
           int64_t count, DType dtype)
      : scope_(scope),
        members_(members),
        me_(me),
        part_(static_cast<uint8_t*>(part)),
        dtype_(dtype),
        counts_(EvenSplit(count, static_cast<int>(members.size()))) {}

  absl::Status Start() {
    const int h = static_cast<int>(members_.size());
    const size_t element = DTypeSize(dtype_);
    pieces_.resize(h);
    size_t offset = 0;
    for (int p = 0; p < h; ++p) {
      pieces_[p] = PeerRegion{offset, static_cast<size_t>(counts_[p]) * element};
      offset += pieces_[p].bytes;
    }
    const size_t own = pieces_[me_].bytes;
    HVDD_ASSIGN_OR_RETURN(data_, scope_.Register(part_, offset));
    HVDD_ASSIGN_OR_RETURN(copies_, scope_.RegisterScratch(h * own + 1));
    // By ring rank: only the members' regions are non-empty.
    none_.assign(scope_.size(), PeerRegion{});
    std::vector<PeerRegion> copy_to(scope_.size()), copy_from(scope_.size());
    std::vector<PeerRegion> result_from(scope_.size());
    result_to_.assign(scope_.size(), PeerRegion{});
    for (int p = 0; p < h; ++p) {
      copy_to[members_[p]] = pieces_[p];
      copy_from[members_[p]] = PeerRegion{p * own, own};
      result_to_[members_[p]] = pieces_[me_];
      result_from[members_[p]] = pieces_[p];
    }
    // A member's result for piece p lands in `part` only after it received
    // all of our copy of piece p: our send of it is done by then.
    HVDD_ASSIGN_OR_RETURN(results_,
                          scope_.PostExchange(data_, none_, data_, result_from, Channel::kResult));
    HVDD_ASSIGN_OR_RETURN(copies_posted_, scope_.PostExchange(data_, copy_to, copies_.buffer,
                                                              copy_from, Channel::kData));
    return absl::OkStatus();
  }

  absl::Status Fold(const AllreduceOptions& options, int total_ranks) {
    HVDD_RETURN_IF_ERROR(scope_.WaitExchange(copies_posted_));
    // In place: our copy first, then the others' in member order (the same
    // order on every local rank: shm::ReduceOwnPart's).
    uint8_t* result = part_ + pieces_[me_].offset;
    const size_t own = pieces_[me_].bytes;
    for (int p = 0; p < static_cast<int>(members_.size()); ++p) {
      if (p != me_) ReduceInto(dtype_, options.op, result, copies_.data + p * own, counts_[me_]);
    }
    FinishReduction(dtype_, options.op, result, counts_[me_], total_ranks,
                    options.postscale_factor);
    HVDD_ASSIGN_OR_RETURN(sent_,
                          scope_.PostExchange(data_, result_to_, data_, none_, Channel::kResult));
    return absl::OkStatus();
  }

  absl::Status Finish() {
    HVDD_RETURN_IF_ERROR(scope_.WaitExchange(results_));
    return scope_.WaitExchange(sent_);
  }

 private:
  CollectiveScope& scope_;
  const std::vector<int>& members_;
  const int me_;
  uint8_t* const part_;
  const DType dtype_;
  const std::vector<int64_t> counts_;
  std::vector<PeerRegion> pieces_, none_, result_to_;
  gloo::transport::UnboundBuffer* data_ = nullptr;
  CollectiveScope::Scratch copies_;
  CollectiveScope::PostedExchange results_, copies_posted_, sent_;
};

// Elements [offset, offset + count) of `tensor`, flat.
TensorView Slice(const TensorView& tensor, int64_t offset, int64_t count) {
  return TensorView{static_cast<uint8_t*>(tensor.data) + offset * DTypeSize(tensor.dtype),
                    tensor.dtype,
                    {count},
                    tensor.device};
}

}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(std::shared_ptr<GlooCommunicator> ring,
                                                   std::unique_ptr<shm::ShmGroup> group,
                                                   HostCrossing crossing)
    : ring_(std::move(ring)), group_(std::move(group)), crossing_(std::move(crossing)) {}

bool HierarchicalCommunicator::CrossesHostsFor(size_t bytes) const {
  if (crossing_.cross_ranks.size() < 2) return false;
  switch (crossing_.mode) {
    case HierarchicalAllreduce::kOn:
      return true;
    case HierarchicalAllreduce::kOff:
      return false;
    case HierarchicalAllreduce::kAuto:
      return bytes >= kHierarchicalAutoMinBytes;
  }
  return false;
}

absl::Status HierarchicalCommunicator::AfterLocal(absl::Status status) {
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
    group_->Fail();
    ring_->context().MarkFailed(status);
  }
  return status;
}

absl::Status HierarchicalCommunicator::AfterRing(absl::Status status) {
  if (!status.ok() && !ring_->health().ok()) group_->Fail();
  return status;
}

absl::Status HierarchicalCommunicator::Allreduce(TensorView inout,
                                                 const AllreduceOptions& options) {
  if (CrossesHostsFor(inout.nbytes())) {
    return AfterRing(AllreduceAcrossHosts(std::move(inout), options));
  }
  return AfterRing(ring_->Allreduce(std::move(inout), options));
}

absl::StatusOr<bool> HierarchicalCommunicator::AllreduceIfAllReady(
    TensorView tensor, bool ready, const AllreduceOptions& options) {
  return AfterRing(ring_->AllreduceIfAllReady(std::move(tensor), ready, options));
}

absl::StatusOr<Tensor> HierarchicalCommunicator::Allgather(const TensorView& input) {
  return AfterRing(ring_->Allgather(input));
}

absl::Status HierarchicalCommunicator::Broadcast(TensorView inout, int root) {
  return AfterRing(ring_->Broadcast(std::move(inout), root));
}

absl::StatusOr<Tensor> HierarchicalCommunicator::Alltoall(const TensorView& input,
                                                          const std::vector<int64_t>& splits,
                                                          std::vector<int64_t>* received_splits) {
  return AfterRing(ring_->Alltoall(input, splits, received_splits));
}

absl::StatusOr<Tensor> HierarchicalCommunicator::Reducescatter(
    const TensorView& input, const ReducescatterOptions& options) {
  return AfterRing(ring_->Reducescatter(input, options));
}

absl::Status HierarchicalCommunicator::Adasum(TensorView inout, double prescale_factor,
                                              double postscale_factor) {
  return AfterRing(ring_->Adasum(std::move(inout), prescale_factor, postscale_factor));
}

absl::Status HierarchicalCommunicator::Barrier() { return AfterRing(ring_->Barrier()); }

void HierarchicalCommunicator::Abort() {
  ring_->Abort();
  group_->Abort();
}

absl::Status HierarchicalCommunicator::health() const {
  HVDD_RETURN_IF_ERROR(ring_->health());
  return group_->health();
}

absl::Status HierarchicalCommunicator::AllreduceAcrossHosts(TensorView inout,
                                                            const AllreduceOptions& options) {
  GlooContext& context = ring_->context();
  const std::string label = OpLabel("allreduce", options.name);
  // One scope for the whole allreduce: every rank draws one sequence number.
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  shm::ShmGroup& group = *group_;
  const absl::Time deadline = CollectiveDeadline(context);
  // What kAverage divides by: every rank of every host.
  const int total_ranks = context.size;
  const std::vector<int64_t> piece_counts =
      EvenSplit(inout.numel(), CrossingPieces(inout.nbytes()));
  const int pieces = static_cast<int>(piece_counts.size());
  std::vector<TensorView> slices;
  int64_t offset = 0;
  for (const int64_t count : piece_counts) {
    slices.push_back(Slice(inout, offset, count));
    offset += count;
  }
  // Piece k: reduced within the host, then its crossing starts; meanwhile
  // piece k - 1's crossing is folded, finished and shared within the host.
  // A failure of the crossing fails the context as the scope ends, and the
  // group with it (AfterRing): local peers waiting in the shared memory wake.
  std::vector<std::unique_ptr<Crossing>> crossings(pieces);
  auto finish = [&](int k) -> absl::Status {
    if (crossings[k] != nullptr) {
      HVDD_RETURN_IF_ERROR(crossings[k]->Fold(options, total_ranks));
      HVDD_RETURN_IF_ERROR(crossings[k]->Finish());
    }
    return AfterLocal(shm::ShareOwnParts(group, slices[k], deadline));
  };
  for (int k = 0; k < pieces; ++k) {
    HVDD_RETURN_IF_ERROR(AfterLocal(shm::ReduceOwnPart(group, slices[k], options, deadline)));
    const shm::PartRange part = shm::OwnPart(slices[k].numel(), group.size(), group.rank());
    if (part.count > 0) {
      crossings[k] = std::make_unique<Crossing>(
          scope, crossing_.cross_ranks, crossing_.cross_index,
          static_cast<uint8_t*>(slices[k].data) + part.offset * DTypeSize(inout.dtype), part.count,
          inout.dtype);
      HVDD_RETURN_IF_ERROR(crossings[k]->Start());
    }
    if (k > 0) HVDD_RETURN_IF_ERROR(finish(k - 1));
  }
  return finish(pieces - 1);
}

}  // namespace horovodd::internal
