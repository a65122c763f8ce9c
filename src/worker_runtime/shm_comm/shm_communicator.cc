#include "worker_runtime/shm_comm/shm_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {

ShmCommunicator::ShmCommunicator(std::shared_ptr<GlooCommunicator> ring,
                                 std::unique_ptr<shm::ShmGroup> group)
    : ring_(std::move(ring)), group_(std::move(group)), negotiator_(*this) {
  HVDD_CHECK_EQ(group_->size(), ring_->size());
  HVDD_CHECK_EQ(group_->rank(), ring_->rank());
  // The group's indices are the ring's ranks: where the ring records whom it
  // waits for (the job's global ring), the rounds in shared memory do too.
  // The ring's context, and so its record, outlives group_.
  group_->set_peer_wait(ring_->context().peer_wait());
}

absl::Time ShmCommunicator::Deadline() const { return CollectiveDeadline(ring_->context()); }

absl::Status ShmCommunicator::AfterLocal(absl::Status status) {
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
    group_->Fail();
    ring_->context().MarkFailed(status);
  }
  return status;
}

absl::Status ShmCommunicator::Allreduce(TensorView inout, const AllreduceOptions& options) {
  return AfterLocal(shm::Allreduce(*group_, std::move(inout), options, Deadline()));
}

absl::Status ShmCommunicator::AllreduceParts(const std::vector<TensorView>& parts,
                                             const AllreduceOptions& options) {
  return AfterLocal(shm::AllreduceParts(*group_, parts, options, Deadline()));
}

SelfConfirmation ShmCommunicator::ConfirmsItself(const TensorView& /*tensor*/,
                                                 const AllreduceOptions& options) const {
  return options.prescale_factor == 1.0 ? SelfConfirmation::kFree : SelfConfirmation::kNone;
}

absl::StatusOr<bool> ShmCommunicator::AllreduceIfAllReady(TensorView tensor, bool ready,
                                                          const AllreduceOptions& options) {
  // Refused before the group is touched: a refusal leaves it usable.
  if (ConfirmsItself(tensor, options) == SelfConfirmation::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat(OpLabel("allreduce", options.name),
                     ": only an allreduce without a prescale confirms itself"));
  }
  return AfterLocal(
      shm::AllreduceIfAllReady(*group_, std::move(tensor), ready, options, Deadline()));
}

absl::StatusOr<Tensor> ShmCommunicator::Allgather(const TensorView& input) {
  return AfterLocal(shm::Allgather(*group_, input, Deadline()));
}

absl::Status ShmCommunicator::Broadcast(TensorView inout, int root) {
  return AfterLocal(shm::Broadcast(*group_, std::move(inout), root, Deadline()));
}

absl::StatusOr<Tensor> ShmCommunicator::Alltoall(const TensorView& input,
                                                 const std::vector<int64_t>& splits,
                                                 std::vector<int64_t>* received_splits) {
  return AfterLocal(shm::Alltoall(*group_, input, splits, received_splits, Deadline()));
}

absl::StatusOr<Tensor> ShmCommunicator::Reducescatter(const TensorView& input,
                                                      const ReducescatterOptions& options) {
  return AfterLocal(shm::Reducescatter(*group_, input, options, Deadline()));
}

absl::Status ShmCommunicator::Adasum(TensorView inout, double prescale_factor,
                                     double postscale_factor) {
  absl::Status status = ring_->Adasum(std::move(inout), prescale_factor, postscale_factor);
  // A ring that failed takes the group with it.
  if (!status.ok() && !ring_->health().ok()) group_->Fail();
  return status;
}

absl::Status ShmCommunicator::Barrier() { return AfterLocal(shm::Barrier(*group_, Deadline())); }

void ShmCommunicator::Abort() {
  ring_->Abort();
  group_->Abort();
}

absl::Status ShmCommunicator::health() const {
  HVDD_RETURN_IF_ERROR(ring_->health());
  return group_->health();
}

}  // namespace horovodd::internal
