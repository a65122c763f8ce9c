// One way of running one generation's collectives on GPU tensors: on NCCL
// (nccl_backend.h) or staged through host memory and the Gloo ring
// (gpu_staging.h). GpuCollectives picks one per generation.
//
// Ops that size their output from the peers return it in host memory:
// horovodd.h's Tensor is a CPU tensor. In-place ops leave their tensor on
// the GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

// From the daemon's rendezvous answer: the new generation is generation
// `from_generation` without the workers that had `excluded_ranks` there,
// everyone else in the same order. from_generation 0: it is not.
struct ShrinkPlan {
  int64_t from_generation = 0;
  std::vector<int> excluded_ranks;
};

// What one generation's backend leaves to the next: a healthy NCCL
// communicator that a later generation made of a subset of the same workers
// shrinks instead of building anew. Opaque outside the backend that made it.
class GpuBackendSeed {
 public:
  virtual ~GpuBackendSeed() = default;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // Hands over what the next generation's backend may build on, if anything;
  // the backend is not used afterwards.
  virtual std::unique_ptr<GpuBackendSeed> TakeSeed() { return nullptr; }
  virtual absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) = 0;
  virtual absl::StatusOr<Tensor> Allgather(const TensorView& input) = 0;
  virtual absl::Status Broadcast(TensorView inout, int root) = 0;
  virtual absl::StatusOr<Tensor> Alltoall(const TensorView& input,
                                          const std::vector<int64_t>& splits,
                                          std::vector<int64_t>* received_splits) = 0;
  virtual absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op) = 0;
};

// Runs a Gloo collective on the current generation's ring (for the worker
// runtime: Runtime::RunCollective, which also maps a superseded generation to
// ABORTED).
using RingOp = std::function<absl::Status(GlooContext& ring)>;
using RingRunner = std::function<absl::Status(const RingOp& op)>;

}  // namespace horovodd::internal
