#include "worker_runtime/gloo/gloo_communicator.h"

#include <utility>

#include "worker_runtime/gloo/gloo_adasum.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd::internal {

GlooCommunicator::GlooCommunicator(std::shared_ptr<GlooContext> context)
    : context_(std::move(context)), negotiator_(*context_) {}

absl::Status GlooCommunicator::Allreduce(TensorView inout, const AllreduceOptions& options) {
  return internal::Allreduce(*context_, std::move(inout), options);
}

SelfConfirmation GlooCommunicator::ConfirmsItself(const TensorView& tensor,
                                                  const AllreduceOptions& options) const {
  return AllreduceConfirmsItself(*context_, tensor, options) ? SelfConfirmation::kInBand
                                                             : SelfConfirmation::kNone;
}

absl::StatusOr<bool> GlooCommunicator::AllreduceIfAllReady(TensorView tensor, bool ready,
                                                           const AllreduceOptions& options) {
  return internal::AllreduceIfAllReady(*context_, std::move(tensor), ready, options);
}

absl::StatusOr<Tensor> GlooCommunicator::Allgather(const TensorView& input) {
  return internal::Allgather(*context_, input);
}

absl::Status GlooCommunicator::Broadcast(TensorView inout, int root) {
  return internal::Broadcast(*context_, std::move(inout), root);
}

absl::StatusOr<Tensor> GlooCommunicator::Alltoall(const TensorView& input,
                                                  const std::vector<int64_t>& splits,
                                                  std::vector<int64_t>* received_splits) {
  return internal::Alltoall(*context_, input, splits, received_splits);
}

absl::StatusOr<Tensor> GlooCommunicator::Reducescatter(const TensorView& input,
                                                       const ReducescatterOptions& options) {
  return internal::Reducescatter(*context_, input, options);
}

absl::Status GlooCommunicator::Adasum(TensorView inout, double prescale_factor,
                                      double postscale_factor) {
  return internal::Adasum(*context_, std::move(inout), prescale_factor, postscale_factor);
}

absl::Status GlooCommunicator::Barrier() { return internal::Barrier(*context_); }

}  // namespace horovodd::internal
