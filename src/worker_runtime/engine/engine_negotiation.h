// One negotiation round of the engine: every rank says which named requests
// it has pending, and all of them learn the same list of requests that are
// pending everywhere (ready), in the same order.
//
// Steady state costs one small exchange: a name every rank has negotiated
// before with the same descriptor sits in the response cache under a slot
// number, and a rank reports it with one bit. Only requests the cache does
// not know as they are (a new name, or a new shape for an old one) are sent
// in full: in the same exchange when they fit in its spare room (a few
// hundred bytes), else in a second exchange that runs only in rounds that
// need it.
// Every rank updates its cache from the same data in the same order, so the
// caches (and slot numbers) stay identical without further messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "worker_runtime/engine/engine_request.h"
#include "worker_runtime/engine/engine_stall.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

// Names with the descriptor every rank agreed on, by slot. Owned by the
// engine thread; cleared when the ring changes.
class ResponseCache {
 public:
  // Past this many names the cache starts over (programs that make a new
  // name per step would otherwise grow it without bound).
  static constexpr size_t kCapacity = 16384;

  struct Entry {
    std::string name;
    std::string descriptor;
  };

  // The slot of `name` if it is cached with exactly `descriptor`.
  std::optional<size_t> Find(const std::string& name, const std::string& descriptor) const;
  // Caches `name` as `descriptor` (a new slot, or its old slot updated).
  void Record(const std::string& name, const std::string& descriptor);
  void Clear();

  size_t size() const { return slots_.size(); }
  const Entry& slot(size_t index) const { return slots_[index]; }

 private:
  std::vector<Entry> slots_;
  std::unordered_map<std::string, size_t> by_name_;
};

// Ranks enqueued one name with different descriptors.
struct Conflict {
  std::string name;
  std::string message;  // names the tensor and what each rank passed
};

struct NegotiationResult {
  std::vector<std::string> ready;  // identical on every rank
  std::vector<Conflict> conflicts;  // identical on every rank
  int64_t fusion_threshold = 0;    // rank 0's
  // Ranks with a join pending (kJoin), ascending. While there are any, a
  // request is ready when every other rank has it; a joined rank that does
  // not runs it on zeros, from the descriptor (an allreduce only: other
  // kinds are conflicts then, as in Horovod).
  std::vector<int> joined;
  // Only while some rank has joined, parallel to `ready`: the descriptor
  // every rank that has the request agreed on, and how many ranks have it
  // (what an average divides by).
  std::vector<std::string> ready_descriptors;
  std::vector<int> ready_contributors;
  // Names pending on some ranks but not ready, with the ranks that do not
  // have them (joined ranks count as having everything): the stall check's.
  std::map<std::string, std::vector<int>> waiting;
};

// Runs one round on `context` (made by ConnectGlooContext) with this rank's
// pending requests and fusion threshold. Errors are the ring's (the context
// is dead afterwards), or DATA_LOSS for a peer's message that does not parse.
// `stall` (optional) hears which peers' parts arrived (engine_stall.h).
absl::StatusOr<NegotiationResult> Negotiate(GlooContext& context,
                                            const std::vector<const Request*>& pending,
                                            int64_t fusion_threshold, ResponseCache& cache,
                                            StallInspector* stall = nullptr);

// The same round in two halves, so the engine can run one collective on the
// same context while the round's first exchange is in flight (see
// engine_speculation.h). Start posts this rank's part and returns at once;
// Finish (called once) waits for the peers', runs the second exchange when
// some rank announced a request in full, decides and updates `cache`. The
// requests and `cache` must not change in between.
class NegotiationInFlight {
 public:
  static absl::StatusOr<std::unique_ptr<NegotiationInFlight>> Start(
      GlooContext& context, const std::vector<const Request*>& pending,
      int64_t fusion_threshold, const ResponseCache& cache, StallInspector* stall = nullptr);
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
