#include "worker_runtime/gpu/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/cuda_status.h"

namespace horovodd::internal {

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("no GPU: cudaGetDeviceCount failed with ",
                                                      cudaGetErrorName(error), " (",
                                                      cudaGetErrorString(error), ")"));
  }
  if (count < 1) return absl::FailedPreconditionError("no GPU: cudaGetDeviceCount found 0 devices");
  return count;
}

absl::Status CheckCudaDevice(int device) {
  HVDD_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", device, " does not exist: this process sees ", count, " GPU(s)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaAllocate(int device, size_t bytes) {
  if (absl::Status valid = CheckCudaDevice(device); !valid.ok()) return valid;
  ScopedCudaDevice on(device);
  if (!on.status().ok()) return on.status();
  void* data = nullptr;
  if (bytes == 0) return data;
  HVDD_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&data, bytes),
                 absl::StrCat("cudaMalloc of ", bytes, " bytes on device ", device)));
  return data;
}

void CudaFree(int device, void* data) {
  if (data == nullptr) return;
  ScopedCudaDevice on(device);
  cudaFree(data);
}

absl::Status CopyDeviceToHost(int device, const void* source, void* host, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status valid = CheckCudaDevice(device); !valid.ok()) return valid;
  ScopedCudaDevice on(device);
  if (!on.status().ok()) return on.status();
  return CudaStatus(
      cudaMemcpy(host, source, bytes, cudaMemcpyDeviceToHost),
      absl::StrCat("copying ", bytes, " bytes from CUDA device ", device, " to host"));
}

absl::Status CopyHostToDevice(int device, const void* host, void* destination, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status valid = CheckCudaDevice(device); !valid.ok()) return valid;
  ScopedCudaDevice on(device);
  if (!on.status().ok()) return on.status();
  return CudaStatus(cudaMemcpy(destination, host, bytes, cudaMemcpyHostToDevice),
                    absl::StrCat("copying ", bytes, " bytes from host to CUDA device ", device));
}

}  // namespace horovodd::internal
