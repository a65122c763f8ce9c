// What one negotiation round is made of, whatever carries it: the response
// cache every rank keeps alike, each rank's part of the round (its wire
// format), and the decision every rank takes from all the parts
// (engine_negotiation.h moves the parts, over the ring or the host's shared
// memory).
//
// A part: a header (fusion threshold, announcement bytes), one bit per cache
// slot (set: this rank has that slot's name pending with its descriptor),
// then the announcements of requests the cache does not know as they are
// ([u32 size][name][u32 size][descriptor]...) when they fit in the room the
// transport gives every part alike; else they go in a second exchange.
// Every rank updates its cache from the same data in the same order, so the
// caches (and slot numbers) stay identical without further messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {

// Names with the descriptor every rank agreed on, by slot. Owned by the
// thread running the engine's rounds; cleared when the ring changes.
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
  std::vector<std::string> ready;   // identical on every rank
  std::vector<Conflict> conflicts;  // identical on every rank
  int64_t fusion_threshold = 0;     // rank 0's
  // Ranks with a join pending (kJoin), ascending. While there are any, a
  // request is ready when every other rank has it; a joined rank that does
  // not runs it on zeros, from the descriptor (an allreduce only: other
  // kinds are conflicts then, as in Horovod).
  std::vector<int> joined;
  // Only while some rank has joined, parallel to `ready`: the descriptor
  // every rank that has the request agreed on (a joined rank runs it on
  // zeros from it; an average still divides by every rank, as in Horovod).
  std::vector<std::string> ready_descriptors;
  // Names pending on some ranks but not ready, with the ranks that do not
  // have them (joined ranks count as having everything): the stall check's.
  std::map<std::string, std::vector<int>> waiting;
};

// The fixed start of every part.
struct PartHeader {
  int64_t fusion_threshold = 0;
  // This rank's announcements: in its part when at most the room, else the
  // whole of its share of the second exchange.
  int64_t announcement_bytes = 0;
};
inline constexpr size_t kPartHeaderBytes = sizeof(PartHeader);

// Where a part's announcements start: after the header and the bitset.
size_t AnnouncementsOffset(const ResponseCache& cache);

// Writes this rank's part for `pending` into `out`, which has room for the
// header, the bitset and `room` bytes of announcements; returns the bytes
// written. `announcements` gets all of them (for the second exchange when
// they exceed `room`).
size_t EncodePart(const std::vector<const Request*>& pending, int64_t fusion_threshold,
                  const ResponseCache& cache, size_t room, uint8_t* out,
                  std::string& announcements);

using Announcement = std::pair<std::string, std::string>;  // name, descriptor

// Every rank's part of a round, decoded.
struct RoundData {
  std::vector<PartHeader> headers;                   // by rank
  std::vector<const uint8_t*> bitsets;               // by rank
  std::vector<std::vector<Announcement>> announced;  // by rank
  // Ranks whose announcements did not fit (they come in a second exchange).
  std::vector<int> announced_later;
};

// Decodes rank `rank`'s part (`room` as given to EncodePart) into `data`,
// sized for every rank. DATA_LOSS for a part that does not parse.
absl::Status DecodePart(absl::Span<const uint8_t> part, int rank, const ResponseCache& cache,
                        size_t room, RoundData& data);
// The announcements of a rank whose part said they came later.
absl::StatusOr<std::vector<Announcement>> ParseAnnouncements(const uint8_t* data, size_t bytes,
                                                             int rank);

// Decides from the same data on every rank; updates `cache` last. `cached`
// (optional) gets the announcements it cached, in order (a deciding rank
// sends them with the result: engine_round_result.h).
NegotiationResult Decide(const RoundData& data, ResponseCache& cache,
                         std::vector<Announcement>* cached = nullptr);

}  // namespace horovodd::internal
