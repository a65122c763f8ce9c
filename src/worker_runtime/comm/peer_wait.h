// Which rank of the job's global process set this rank's transport is
// blocked on, for the daemon's stall detector: when every rank has submitted
// a collective and one transfer stalls (a link dropping packets one way),
// the ranks' reports of whom they wait for name the link by its two ends.
//
// The collective thread writes it on entering and leaving a blocking wait
// for a peer's data (a receive); the daemon client's heartbeat thread reads
// it. Entering costs a clock read and two relaxed stores, leaving one store:
// nothing polls, and nothing else runs on the collective path. One per
// runtime (ActivityTracker owns it); the global set's transports hold it:
// the TCP ring's receives, and the host's shared-memory rounds where every
// rank of the job shares the host (shm/shm_group.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace horovodd::internal {

class PeerWait {
 public:
  // Collective thread: this rank now waits for `rank`'s data.
  void Enter(int rank) {
    since_nanos_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
    rank_.store(rank, std::memory_order_release);
  }
  // Collective thread: the same wait goes on, now for `rank`'s data (a
  // barrier waits for whichever peer has not arrived yet). One store.
  void Redirect(int rank) { rank_.store(rank, std::memory_order_release); }
  // Collective thread: it waits no more.
  void Leave() { rank_.store(-1, std::memory_order_release); }

  struct Waiting {
    int rank = -1;
    absl::Time since;
  };
  // Any thread: the wait in progress, if any. A wait that changes while it is
  // read may pair a rank with its neighbour's start; the next read is right.
  std::optional<Waiting> Current() const {
    const int rank = rank_.load(std::memory_order_acquire);
    if (rank < 0) return std::nullopt;
    return Waiting{rank, absl::FromUnixNanos(since_nanos_.load(std::memory_order_relaxed))};
  }

 private:
  std::atomic<int> rank_{-1};
  std::atomic<int64_t> since_nanos_{0};
};

// Enter on construction, Leave at the end of the scope (no-op without a
// PeerWait or a known rank).
class ScopedPeerWait {
 public:
  ScopedPeerWait(PeerWait* wait, int rank) : wait_(rank >= 0 ? wait : nullptr) {
    if (wait_ != nullptr) wait_->Enter(rank);
  }
  ~ScopedPeerWait() {
    if (wait_ != nullptr) wait_->Leave();
  }
  ScopedPeerWait(const ScopedPeerWait&) = delete;
  ScopedPeerWait& operator=(const ScopedPeerWait&) = delete;

 private:
  PeerWait* const wait_;
};

}  // namespace horovodd::internal
