// Overlapping a round's negotiation with the collective it is about to agree
// on.
//
// A loop that calls one synchronous allreduce per step (a loss, a metric, a
// flat gradient buffer) makes every round the same: one request, same name,
// same descriptor. Negotiating it and then reducing it costs two exchanges
// that each wait for every rank, and on a busy machine (more processes than
// cores) the first costs about as much as the second. So after two such
// rounds in a row every rank predicts that the next round is the same again
// and, in it, reduces the predicted tensor into the fusion buffer while the
// negotiation's messages are in flight. The negotiation then decides as
// always. If it found the predicted request ready everywhere with the
// predicted descriptor, the result is copied into the caller's tensor. If
// not, the result is thrown away, the prediction is dropped and the round
// goes on as usual; the cost of a wrong guess is one wasted collective.
//
// Every rank predicts from negotiated rounds only, which are identical on
// every rank, so all ranks run the speculative collective or none does, and
// with the same size. A rank that does not have the request pending takes
// part with zeros. Owned by the thread running the round, like the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gloo/context.h>

#include "absl/status/status.h"
#include "horovodd/tensor.h"
#include "worker_runtime/engine_fusion.h"
#include "worker_runtime/engine_negotiation.h"
#include "worker_runtime/engine_request.h"

namespace horovodd::internal {

// Larger tensors are not worth it: the two copies through the fusion buffer
// grow with the size, the exchange saved does not (measured at 4 ranks on
// loopback: 1 MiB calls gained 15-25%, 4 MiB calls lost about 10%).
constexpr size_t kMaxSpeculativeBytes = size_t{1} << 20;

// What the next round is predicted to be: everything needed to run the same
// allreduce without the request (a rank may not have it pending).
struct PredictedAllreduce {
  std::string name;
  std::string descriptor;
  DType dtype = DType::kFloat32;
  int64_t elements = 0;
  AllreduceOptions options;

  size_t nbytes() const { return static_cast<size_t>(elements) * DTypeSize(dtype); }
};

class AllreducePredictor {
 public:
  // After every round, with its negotiated outcome and the requests this
  // rank had in it (before any completed).
  void Observe(const NegotiationResult& round, const std::vector<Request>& taken);
  // Forgets everything (a new ring).
  void Reset();

  const std::optional<PredictedAllreduce>& prediction() const { return prediction_; }

 private:
  std::string last_name_;
  std::string last_descriptor_;
  int streak_ = 0;  // rounds in a row that were exactly that one allreduce
  std::optional<PredictedAllreduce> prediction_;
};

// Runs `predicted` on `context` in `fusion`: this rank's tensor when `taken`
// holds the request with the predicted descriptor, zeros when not.
absl::Status ReducePredicted(gloo::Context& context, const PredictedAllreduce& predicted,
                             const std::vector<Request>& taken, FusionBuffer& fusion);

// After ReducePredicted and the round's negotiation: when the round found the
// predicted request ready with the predicted descriptor, copies the result
// from `fusion` into the request's tensor and returns its index in `taken`.
std::optional<size_t> TakeConfirmed(const PredictedAllreduce& predicted,
                                    const NegotiationResult& round,
                                    const std::vector<Request>& taken, FusionBuffer& fusion);

}  // namespace horovodd::internal
