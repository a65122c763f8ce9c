// cuda_memory.h for a build without the CUDA toolkit: there is no GPU to use.
#include "worker_runtime/gpu/cuda_memory.h"

namespace horovodd::internal {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "no GPU: this build of horovodd has no CUDA support (the CUDA toolkit was not found "
      "when it was built)");
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() { return NoCuda(); }
absl::Status CheckCudaDevice(int) { return NoCuda(); }
absl::StatusOr<void*> CudaAllocate(int, size_t) { return NoCuda(); }
void CudaFree(int, void*) {}
absl::Status CopyDeviceToHost(int, const void*, void*, size_t) { return NoCuda(); }
absl::Status CopyHostToDevice(int, const void*, void*, size_t) { return NoCuda(); }

}  // namespace horovodd::internal
