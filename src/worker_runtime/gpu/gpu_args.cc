#include "worker_runtime/gpu/gpu_args.h"

#include "absl/strings/str_cat.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {

absl::Status CheckGpuTensor(const std::string& label, const TensorView& view, int device) {
  if (view.device.type != DeviceType::kCUDA) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": tensor is on the CPU; GPU collectives take CUDA tensors"));
  }
  if (view.device.index != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": tensor is on CUDA device ", view.device.index,
                     " but this worker's GPU collectives use device ", device,
                     " (every GPU tensor of a worker must be on one device)"));
  }
  return CheckTensorLayout(label, view);
}

}  // namespace horovodd::internal
