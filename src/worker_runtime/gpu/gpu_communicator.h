// The communicators of GPU tensors, one per generation: on NCCL
// (nccl/nccl_communicator.h) or staged through host memory onto the
// generation's CPU communicator (gpu_staging.h); runtime/gpu_collectives.h
// picks one per generation. Their ops are comm/communicator.h's, on CUDA
// tensors: in-place ops leave their tensor on the GPU, results sized by the
// peers come back in host memory. Neither negotiates nor runs Adasum
// (INVALID_ARGUMENT).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "worker_runtime/comm/communicator.h"

namespace horovodd::internal {

// From the daemon's rendezvous answer: the new generation is generation
// `from_generation` without the workers that had `excluded_ranks` there,
// everyone else in the same order. from_generation 0: it is not.
struct ShrinkPlan {
  int64_t from_generation = 0;
  std::vector<int> excluded_ranks;
};

// What one generation's GPU communicator leaves to the next: a healthy NCCL
// communicator that a later generation made of a subset of the same workers
// shrinks instead of building anew. Opaque outside the communicator that
// made it.
class GpuSeed {
 public:
  virtual ~GpuSeed() = default;
};

class GpuCommunicator : public Communicator {
 public:
  // Hands over what the next generation's communicator may build on, if
  // anything; this one is not used afterwards.
  virtual std::unique_ptr<GpuSeed> TakeSeed() { return nullptr; }
};

}  // namespace horovodd::internal
