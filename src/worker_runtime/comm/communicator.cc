#include "worker_runtime/comm/communicator.h"

#include "absl/strings/str_cat.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {

absl::Status Communicator::AllreduceParts(const std::vector<TensorView>& /*parts*/,
                                          const AllreduceOptions& options) {
  return absl::FailedPreconditionError(
      absl::StrCat(OpLabel("allreduce", options.name),
                   ": an allreduce of separate parts runs only where every rank shares this host"));
}

SelfConfirmation Communicator::ConfirmsItself(const TensorView& /*tensor*/,
                                              const AllreduceOptions& /*options*/) const {
  return SelfConfirmation::kNone;
}

absl::StatusOr<bool> Communicator::AllreduceIfAllReady(TensorView /*tensor*/, bool /*ready*/,
                                                       const AllreduceOptions& options) {
  return absl::FailedPreconditionError(
      absl::StrCat(OpLabel("allreduce", options.name),
                   ": this communicator's allreduce does not confirm itself"));
}

}  // namespace horovodd::internal
