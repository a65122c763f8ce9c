// The engine's negotiation rounds among the ranks of one host, in their
// segment (shm_group.h's negotiation area); shm_comm/shm_negotiator.h is the
// engine's Negotiator over it.
//
// Each rank publishes its part of a round (what it has pending) in a slot of
// its own, bumps its published count and the area's count of publishes (the
// round's last publish wakes the collectors). Then either way:
// - every rank decides (small groups): once every rank's count reached the
//   round, every rank reads every part and decides the round from them, so a
//   round costs one wait, not a request and then a response;
// - rank 0 decides (ShmGroup::rank_zero_decides: many local ranks): only
//   rank 0 collects and reads the parts; it publishes the round's result (or
//   "decide yourselves", for a round whose result does not fit or that needs
//   its second exchange), which the others wait for. A round then costs
//   the host O(ranks) reads, not O(ranks^2): at 256 local ranks every rank
//   reading every part was 256 x 256 part reads and decisions per round.
//
// Two sets of slots, used in alternating rounds. A rank writing round k + 2
// has collected round k + 1 (or had its result), so every peer has published
// round k + 1, which a peer does only after it finished reading round k.
// Rank 0 writes round k's result once every rank published round k, after
// each had read round k - 1's: one result area does. The waits are the
// group's (ShmGroup::Await): an abort, a failed group, a dead peer or the
// deadline ends them, on every local rank at once.
//
// Used by the one thread that runs the engine's rounds on this ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal::shm {

class NegotiationChannel {
 public:
  // Bytes of one rank's part of a round: a round's header, a full response
  // cache's bitset (2 KiB) and the announcements of a few hundred new
  // names. A round that needs more sends the rest another way (in the
  // group's rounds).
  static constexpr size_t kPartBytes = size_t{32} << 10;
  // Bytes of a round's result, where rank 0 decides.
  static constexpr size_t kResultBytes = kNegotiationHeaderBytes - 64;

  explicit NegotiationChannel(ShmGroup& group);
  NegotiationChannel(const NegotiationChannel&) = delete;
  NegotiationChannel& operator=(const NegotiationChannel&) = delete;

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }

  // This rank's part of the next round, kPartBytes long: fill it, then
  // Publish. Only after the last round was collected.
  uint8_t* NextPart();
  // Publishes the first `bytes` of NextPart() as this rank's part.
  void Publish(size_t bytes);
  // Waits until every rank published the round this rank published last.
  // `arrived` hears each peer once, when its part is seen (the stall
  // check's PeerArrived): at once while this rank spins, within a quarter
  // of a second while it sleeps (only the round's last publish wakes it).
  // Errors are the group's (ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED); the
  // group is dead on every local rank afterwards.
  absl::Status Collect(absl::Time deadline, absl::FunctionRef<void(int)> arrived);
  // After Collect: rank r's part of the round.
  absl::Span<const uint8_t> Part(int r) const;

  // Where rank 0 decides (the group's choice, the same on every rank):
  bool rank_zero_decides() const { return rank_zero_decides_; }
  // Rank 0, after Collect: where the round's result goes (kResultBytes).
  uint8_t* ResultBuffer();
  // Rank 0, once per round after Collect: publishes the first `bytes` of
  // ResultBuffer() as the round's result, or with nullopt tells the others
  // to decide it from the parts (Collect, which then returns at once).
  void PublishResult(std::optional<size_t> bytes);
  // The other ranks, after Publish: waits for rank 0's word on the round:
  // its result (valid until this rank's next Publish), or nullopt: decide
  // from the parts. `arrived` and errors as Collect's; peers are heard
  // only in a wait of more than a quarter of a second (from their
  // published counts, for the stall check), not in every round.
  absl::StatusOr<std::optional<absl::Span<const uint8_t>>> AwaitResult(
      absl::Time deadline, absl::FunctionRef<void(int)> arrived);

 private:
  struct RankControl;
  struct AreaControl;
  AreaControl& area_control() const;
  RankControl& control(int r) const;
  // Rank r's part of `round` in its front (a copy of a small part) and in
  // full (where NextPart writes).
  uint8_t* front_part(int r, uint64_t round) const;
  uint8_t* part(int r, uint64_t round) const;

  // Marks the peers whose part of `round` is published, once each.
  void NoteArrivals(uint64_t round, std::vector<bool>& seen, int& missing,
                    absl::FunctionRef<void(int)> arrived) const;

  ShmGroup& group_;
  const bool rank_zero_decides_;
  uint8_t* const area_;
  uint8_t* const fronts_;  // after the area's own line and the result
  // Rounds this rank published, and collected or had decided (equal
  // between rounds).
  uint64_t published_ = 0;
  uint64_t collected_ = 0;
  // Rank 0: rounds whose result (or "decide yourselves") it published.
  uint64_t decided_ = 0;
};

}  // namespace horovodd::internal::shm
