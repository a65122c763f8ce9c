// One worker's collectives on GPU tensors, beside its Gloo ring: the runtime
// owns one, tells it when the worker enters or leaves a generation and when
// the daemon aborts one, and hands it every CUDA tensor. Per generation it
// runs them on NCCL (HOROVOD_GPU_OPERATIONS=nccl, the default when built with
// NCCL) or stages them through host memory onto the Gloo ring (gloo).
//
// Failures read as the ring's do: ABORTED when the daemon superseded the
// generation, UNAVAILABLE for a lost peer (a timeout counts as one),
// INVALID_ARGUMENT for a bad tensor, and for any CUDA tensor in a build
// without CUDA.
//
// Threads: the training thread calls everything but Abort(), which the
// attach thread calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gpu/gpu_backend.h"
#include "worker_runtime/gpu/gpu_operations.h"
#include "worker_runtime/gpu/unique_id_exchange.h"

namespace horovodd::internal {

struct GpuCollectivesOptions {
  GpuOperations operations = GpuOperations::kGloo;
  // Bounds making a communicator and each NCCL op (the ring timeout).
  absl::Duration timeout = absl::Seconds(30);
  // The staging path's way onto the current ring.
  RingRunner ring;
};

class GpuCollectives {
 public:
  explicit GpuCollectives(GpuCollectivesOptions options);
  ~GpuCollectives();
  GpuCollectives(const GpuCollectives&) = delete;
  GpuCollectives& operator=(const GpuCollectives&) = delete;

  // The worker is rank `rank` of `size` in `generation`; `store` is that
  // generation's key-value namespace. Drops the previous generation's
  // backend: an NCCL communicator is never reused as it is, but when `shrink`
  // says only workers left since it was made, the new one is shrunk from it.
  void EnterGeneration(int64_t generation, int rank, int size, ShrinkPlan shrink,
                       std::unique_ptr<KvStore> store);
  // Drops the current generation's backend, keeping what the next generation
  // may shrink (see EnterGeneration).
  void LeaveGeneration();
  // The daemon announced `generation` and aborted older ones: an NCCL op or
  // communicator set-up of an older generation stops at its next poll.
  void Abort(int64_t generation);

  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options);
  absl::StatusOr<Tensor> Allgather(const TensorView& input);
  absl::Status Broadcast(TensorView inout, int root);
  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits);
  absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op);

 private:
  std::unique_ptr<GpuBackend> MakeBackend(int64_t generation, int rank, int size,
                                          ShrinkPlan shrink,
                                          std::unique_ptr<KvStore> store);
  // The backend for an op on `tensor`, or why there is none.
  absl::StatusOr<GpuBackend*> Backend(const std::string& label, const TensorView& tensor) const;
  // What the caller sees of an op's failure (see the header comment).
  absl::Status Outcome(const absl::Status& status) const;
  // Worded like Runtime's: "the daemon aborted generation G (generation H
  // replaces it) (cause)".
  absl::Status SupersededError(const absl::Status& cause) const;
  bool Superseded() const;

  const GpuCollectivesOptions options_;
  // Written by the attach thread, read by the training thread.
  std::atomic<int64_t> aborted_generation_{0};
  // Owned by the training thread.
  int64_t generation_ = 0;
  std::unique_ptr<GpuBackend> backend_;
  // What the last generation's backend left for the next one; null if none.
  std::unique_ptr<GpuBackendSeed> seed_;
};

}  // namespace horovodd::internal
