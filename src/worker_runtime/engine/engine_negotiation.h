// One negotiation round of the engine: every rank says which named requests
// it has pending, and all of them learn the same list of requests that are
// pending everywhere (ready), in the same order.
//
// Steady state costs one small exchange: a name every rank has negotiated
// before with the same descriptor sits in the response cache under a slot
// number, and a rank reports it with one bit (engine_decide.h: the parts,
// the cache, the decision). Only requests the cache does not know as they
// are (a new name, or a new shape for an old one) are sent in full: in the
// same exchange when they fit in its room, else in a second exchange that
// runs only in rounds that need it.
//
// How the parts travel is the Negotiator's (comm/negotiator.h), which the
// round's communicator gives: through the host's segment where every rank
// shares this host, else over the TCP ring. Every rank of a communicator
// takes the same way, so the parts, and the decision, are the same either way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker_runtime/comm/negotiator.h"
#include "worker_runtime/engine/engine_decide.h"
#include "worker_runtime/engine/engine_request.h"
#include "worker_runtime/engine/engine_stall.h"

namespace horovodd::internal {

// Runs one round through `negotiator` with this rank's pending requests and
// fusion threshold. Errors are the negotiator's (its communicator is dead
// afterwards), or DATA_LOSS for a peer's part that does not parse.
// `stall` (optional) hears which peers' parts arrived (engine_stall.h).
absl::StatusOr<NegotiationResult> Negotiate(Negotiator& negotiator,
                                            const std::vector<const Request*>& pending,
                                            int64_t fusion_threshold, ResponseCache& cache,
                                            StallInspector* stall = nullptr);

// The same round in two halves, so the engine can run one collective on the
// same communicator while the round's first exchange is in flight (see
// engine_speculation.h). Start posts this rank's part and returns at once;
// Finish (called once) waits for the peers', runs the second exchange when
// some rank announced a request in full, decides and updates `cache`. The
// requests and `cache` must not change in between.
class NegotiationInFlight {
 public:
  static absl::StatusOr<std::unique_ptr<NegotiationInFlight>> Start(
      Negotiator& negotiator, const std::vector<const Request*>& pending, int64_t fusion_threshold,
      const ResponseCache& cache, StallInspector* stall = nullptr);
  // Abandons the round unless Finish ended it.
  ~NegotiationInFlight();
  NegotiationInFlight(const NegotiationInFlight&) = delete;
  NegotiationInFlight& operator=(const NegotiationInFlight&) = delete;

  absl::StatusOr<NegotiationResult> Finish(ResponseCache& cache);

 private:
  struct State;
  explicit NegotiationInFlight(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace horovodd::internal
