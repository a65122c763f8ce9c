#include "worker_runtime/shm/shm_collective_support.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal::shm {

absl::Status Checked(ShmGroup& group, absl::Status status) {
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) group.Fail();
  return status;
}

absl::Status CheckAllreduceArgs(const std::string& label, const TensorView& tensor,
                                const AllreduceOptions& options) {
  HVDD_RETURN_IF_ERROR(CheckTensor(label, tensor));
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "prescale_factor", options.prescale_factor));
  return CheckScaleFactor(label, "postscale_factor", options.postscale_factor);
}

}  // namespace horovodd::internal::shm
