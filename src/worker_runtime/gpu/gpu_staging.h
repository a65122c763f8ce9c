// GPU collectives without NCCL (or with HOROVOD_GPU_OPERATIONS=gloo): each
// GPU tensor is copied to host memory, the Gloo collective runs on the ring,
// and in-place results are copied back. Needs only the CUDA runtime; in a
// build without CUDA the copies fail with FAILED_PRECONDITION.
//
// A rank whose GPU tensor is unusable (wrong device, null data) fails alone
// before entering the ring, like a rank whose allreduce arguments are bad on
// the CPU: its peers wait until the ring timeout.
#pragma once

#include <memory>

#include "worker_runtime/gpu/gpu_backend.h"

namespace horovodd::internal {

std::unique_ptr<GpuBackend> MakeStagedBackend(RingRunner ring);

}  // namespace horovodd::internal
