// One worker's collectives on GPU tensors, beside its CPU communicator: the
// runtime owns one, tells it when the worker enters or leaves a generation
// and when the daemon aborts one, and hands it every CUDA tensor. Per
// generation it makes a GPU communicator (gpu/gpu_communicator.h): on NCCL
// (HOROVOD_GPU_OPERATIONS=nccl, the default when built with NCCL), or
// staging through host memory onto the CPU communicator (gloo).
//
// Failures read as the CPU ones do: ABORTED when the daemon superseded the
// generation, UNAVAILABLE for a lost peer (a timeout counts as one),
// INVALID_ARGUMENT for a bad tensor, and for any CUDA tensor in a build
// without CUDA.
//
// Threads: the training thread enters and leaves generations, the engine
// thread runs ops (Run), the attach thread calls Abort().
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
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gpu/gpu_communicator.h"
#include "worker_runtime/gpu/gpu_operations.h"
#include "worker_runtime/gpu/unique_id_exchange.h"

namespace horovodd::internal {

struct GpuCollectivesOptions {
  GpuOperations operations = GpuOperations::kGloo;
  // Bounds making a communicator and each NCCL op (the ring timeout).
  absl::Duration timeout = absl::Seconds(30);
  // The current generation's CPU communicator: staging runs on it, and the
  // NCCL communicator's ranks agree on shrinking there.
  CommunicatorRunner cpu;
};

class GpuCollectives {
 public:
  explicit GpuCollectives(GpuCollectivesOptions options);
  ~GpuCollectives();
  GpuCollectives(const GpuCollectives&) = delete;
  GpuCollectives& operator=(const GpuCollectives&) = delete;

  // The worker is rank `rank` of `size` in `generation`; `store` is that
  // generation's key-value namespace. Drops the previous generation's
  // communicator: an NCCL communicator is never reused as it is, but when
  // `shrink` says only workers left since it was made, the new one is shrunk
  // from it.
  void EnterGeneration(int64_t generation, int rank, int size, ShrinkPlan shrink,
                       std::unique_ptr<KvStore> store);
  // Drops the current generation's communicator, keeping what the next
  // generation may shrink (see EnterGeneration).
  void LeaveGeneration();
  // The daemon announced `generation` and aborted older ones: an NCCL op or
  // communicator set-up of an older generation stops at its next poll.
  void Abort(int64_t generation);

  // Runs `op` on the current generation's GPU communicator; `operation`
  // ("allreduce") and `tensor` (on its CUDA device) name it in the errors of
  // a worker that has no communicator for it.
  absl::Status Run(const char* operation, const TensorView& tensor, CommunicatorOp op);

 private:
  std::unique_ptr<GpuCommunicator> MakeCommunicator(int64_t generation, int rank, int size,
                                                    ShrinkPlan shrink,
                                                    std::unique_ptr<KvStore> store);
  // The communicator for an op on `tensor`, or why there is none.
  absl::StatusOr<GpuCommunicator*> Current(const char* operation, const TensorView& tensor) const;
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
  std::unique_ptr<GpuCommunicator> comm_;
  // What the last generation's communicator left for the next one; null if none.
  std::unique_ptr<GpuSeed> seed_;
};

}  // namespace horovodd::internal
