// The CUDA runtime calls GPU tensors need outside NCCL: how many GPUs there
// are, device memory, and blocking copies. cuda_memory.cc implements them on
// the CUDA runtime; in a build without CUDA, cuda_memory_unavailable.cc
// answers FAILED_PRECONDITION ("this build of horovodd has no CUDA support").
//
// Every call switches to `device` for its duration and back (the caller's
// current device is left alone). Copies run on the legacy default stream, so
// they wait for the caller's earlier GPU work, but never for the NCCL
// communicator's stream (a non-blocking one).
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace horovodd::internal {

// The number of GPUs this process can use, at least 1; FAILED_PRECONDITION
// starting "no GPU: " with CUDA's reason when there is none.
absl::StatusOr<int> CudaDeviceCount();

// INVALID_ARGUMENT for a device index out of range.
absl::Status CheckCudaDevice(int device);

absl::StatusOr<void*> CudaAllocate(int device, size_t bytes);
// Frees what CudaAllocate returned; null is ignored.
void CudaFree(int device, void* data);

absl::Status CopyDeviceToHost(int device, const void* source, void* host, size_t bytes);
absl::Status CopyHostToDevice(int device, const void* host, void* destination, size_t bytes);

}  // namespace horovodd::internal
