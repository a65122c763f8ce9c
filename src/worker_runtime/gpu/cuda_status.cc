#include "worker_runtime/gpu/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace horovodd::internal {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorSystemNotReady:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCudartUnloading:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      return absl::InvalidArgumentError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

ScopedCudaDevice::ScopedCudaDevice(int device) {
  int current = -1;
  status_ = CudaStatus(cudaGetDevice(&current), "cudaGetDevice");
  if (!status_.ok() || current == device) return;
  status_ = CudaStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  if (status_.ok()) previous_ = current;
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace horovodd::internal
