// A negotiation round's result as the rank that decided it sends it to the
// others (comm/negotiator.h's decider): the NegotiationResult, and the
// announcements the decision cached, in the order it cached them, so that
// every rank's response cache stays the same as the decider's.
//
// The result travels within one host (shared memory): native byte order.
// [i64 fusion threshold] then counted lists, each count a u32: the cached
// announcements (name, descriptor), the ready names, the conflicts (name,
// message), the joined ranks (i32), the ready descriptors, and the waiting
// names (name, then a count and the ranks missing it).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker_runtime/engine/engine_decide.h"

namespace horovodd::internal {

// Writes `result` and `cached` (Decide's, in order) into `out`; the bytes
// written, or nullopt when they do not fit (the ranks then decide the round
// from the parts themselves).
std::optional<size_t> EncodeRoundResult(const NegotiationResult& result,
                                        const std::vector<Announcement>& cached,
                                        absl::Span<uint8_t> out);

// Reads a result EncodeRoundResult wrote and caches its announcements in
// `cache`, in order: the result and the cache are then what the decider
// has. DATA_LOSS for bytes that do not parse (`cache` is then unchanged).
absl::StatusOr<NegotiationResult> ApplyRoundResult(absl::Span<const uint8_t> encoded,
                                                   ResponseCache& cache);

}  // namespace horovodd::internal
