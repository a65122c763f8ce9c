// GPU collectives on NCCL for one generation (a GpuCommunicator). The NCCL
// communicator is made at the generation's first op (so a job that never
// uses a GPU never touches CUDA), on the device of that op's tensor; if
// making it fails (other than for a bad device), every later op of the
// generation returns that failure. When only workers left since the
// previous generation, it is shrunk from that generation's communicator
// instead (if every rank agrees it can be). NCCL builds only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gpu/gpu_communicator.h"
#include "worker_runtime/gpu/unique_id_exchange.h"

namespace horovodd::internal {

struct NcclCommunicatorOptions {
  int64_t generation = 0;
  int rank = 0;
  int size = 1;
  absl::Duration timeout = absl::Seconds(30);
  // The generation's key-value namespace, for the unique id.
  std::unique_ptr<KvStore> store;
  // True once the daemon superseded the generation (see NcclCommOptions).
  std::function<bool()> should_abort;
  // Whether this generation may shrink an older one's communicator.
  ShrinkPlan shrink;
  // The previous generation's seed (may be null): when `shrink` names its
  // generation and every rank still holds a healthy communicator, the new
  // one is shrunk from it (ncclCommShrink, NCCL 2.27+).
  std::unique_ptr<GpuSeed> seed;
  // The generation's CPU communicator, where the ranks agree on shrinking.
  CommunicatorRunner cpu;
};

std::unique_ptr<GpuCommunicator> MakeNcclCommunicator(NcclCommunicatorOptions options);

}  // namespace horovodd::internal
