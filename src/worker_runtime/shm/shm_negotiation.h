// The engine's negotiation rounds among the ranks of one host, in their
// segment (shm_group.h's negotiation area); shm_comm/shm_negotiator.h is the
// engine's Negotiator over it.
//
// Each rank publishes its part of a round (what it has pending) in a slot of
// its own, bumps its published count and the area's count of publishes (the
// round's last publish wakes the collectors); once every rank's count
// reached the round, every rank reads every part. There is no coordinator:
// every rank decides the round from the same parts, as over TCP, so a round costs one
// wait, not a request and then a response.
//
// Two sets of slots, used in alternating rounds. A rank writing round k + 2
// has collected round k + 1, so every peer has published round k + 1, which
// a peer does only after it finished reading round k. The waits are the
// group's (ShmGroup::Await): an abort, a failed group, a dead peer or the
// deadline ends them, on every local rank at once.
//
// Used by the one thread that runs the engine's rounds on this ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
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

 private:
  struct RankControl;
  // Every rank's publishes, all rounds together.
  std::atomic<uint64_t>& publishes() const;
  RankControl& control(int r) const;
  // Rank r's part of `round` in its front (a copy of a small part) and in
  // full (where NextPart writes).
  uint8_t* front_part(int r, uint64_t round) const;
  uint8_t* part(int r, uint64_t round) const;

  ShmGroup& group_;
  uint8_t* const area_;
  uint8_t* const fronts_;  // after the area's own line
  // Rounds this rank published, and collected (equal between rounds).
  uint64_t published_ = 0;
  uint64_t collected_ = 0;
};

}  // namespace horovodd::internal::shm
