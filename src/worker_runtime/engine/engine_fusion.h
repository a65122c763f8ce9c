// Turns the requests a negotiation found ready into collectives: ready
// allreduces (and reducescatters) of the same dtype, op and scale factors,
// and broadcasts of the same root, are packed into one fusion buffer up to
// the fusion threshold, reduced (or broadcast) with one collective and
// unpacked. Every rank plans
// from the same ready list and threshold, so all run the same collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {

// Requests that run as one collective, in the order every rank uses.
struct Batch {
  RequestKind kind = RequestKind::kAllreduce;
  std::vector<Request*> requests;
};

// `ready` in negotiated order. A request larger than the threshold (or a
// group, which is never split) may make a batch larger than it.
std::vector<Batch> PlanBatches(const std::vector<Request*>& ready, int64_t fusion_threshold);

// The engine's reusable staging memory; grows to the largest batch seen.
class FusionBuffer {
 public:
  uint8_t* Reserve(size_t bytes);

 private:
  std::vector<uint8_t> bytes_;
};

// Called as a batch moves from one activity to the next, in Horovod's
// timeline names: "MEMCPY_IN_FUSION_BUFFER", "GLOO_ALLREDUCE",
// "MEMCPY_OUT_FUSION_BUFFER" (engine_timeline.h).
using ActivityObserver = std::function<void(const std::string& activity)>;

// Runs `batch` on the communicator `comm` reaches; the status applies to
// every request in it. For allgather and reducescatter, (*outputs)[i]
// receives request i's result. `activity` (may be empty) hears each activity as it starts: the
// collective's, and around it the copies into and out of the fusion buffer
// when the batch has several tensors (none where the communicator reduces
// the parts where they lie).
absl::Status RunBatch(const Batch& batch, const CommunicatorRunner& comm, FusionBuffer& fusion,
                      std::vector<std::optional<Tensor>>* outputs,
                      const ActivityObserver& activity = {});

}  // namespace horovodd::internal
