// CUDA runtime errors as absl::Status, and the calling thread's current
// device switched for a scope. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace horovodd::internal {

// OK for cudaSuccess; otherwise "<what>: <cudaErrorName> (<description>)"
// with FAILED_PRECONDITION when there is no usable GPU or driver,
// INVALID_ARGUMENT for a bad device, pointer or value, RESOURCE_EXHAUSTED
// when out of memory, INTERNAL for anything else (a failed kernel, ECC).
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Makes `device` the thread's current CUDA device and restores the previous
// one on destruction, so our calls never move the caller's thread to another
// GPU. status() says whether switching worked.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;  // -1: nothing to restore
  absl::Status status_;
};

}  // namespace horovodd::internal
