// GPU collectives without NCCL (or with HOROVOD_GPU_OPERATIONS=gloo): each
// GPU tensor is copied to host memory, the op runs on the generation's CPU
// communicator, and in-place results are copied back. Needs only the CUDA
// runtime; in a build without CUDA the copies fail with FAILED_PRECONDITION.
//
// A rank whose GPU tensor is unusable (wrong device, null data) fails alone
// before entering the CPU communicator, like a rank whose allreduce
// arguments are bad on the CPU: its peers wait until the timeout.
#pragma once

#include <memory>

#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gpu/gpu_communicator.h"

namespace horovodd::internal {

// `cpu` runs ops on the generation's CPU communicator, of `size` ranks
// (this one `rank`). Its aborts and failures are the CPU communicator's.
std::unique_ptr<GpuCommunicator> MakeStagedCommunicator(CommunicatorRunner cpu, int rank, int size);

}  // namespace horovodd::internal
