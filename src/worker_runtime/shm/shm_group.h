// The ranks of one host sharing one segment (shm_segment.h): its layout, the
// rounds every collective on it is made of, and the waits that end on an
// abort, a dead peer or the deadline instead of blocking for ever.
//
// A round: every rank writes what it shares into its own slot (and its
// header words) of the round's buffer set, then Sync(): after it, every rank
// may read every slot of that set (a round may Sync more than once, e.g. to
// read what peers reduced in place). NextRound() moves to the other set.
// Every round Syncs at least once, so a rank writing round k + 2 (set k % 2
// again) has seen every peer arrive in round k + 1, which they do only after
// they finished reading round k. Every rank runs the same rounds in the same
// order (one collective thread per rank, as on the Gloo ring).
//
// A wait spins briefly (peers on one host answer in microseconds), then
// sleeps on a futex in the segment, waking every kLivenessPoll to check that
// the peers it waits for are alive (a pidfd per peer). Abort() (the
// generation was superseded) and Fail() (a collective failed here) set the
// segment's state word and wake every sleeper on the host: every wait of
// every local rank then fails at once, and so does every later one.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/shm/shm_segment.h"

namespace horovodd::internal::shm {

// Bytes per rank per round for collective data. A chunk of this size is
// copied in, reduced and copied out while it is still in the cache.
inline constexpr size_t kDefaultSlotBytes = size_t{1} << 20;
// Header words per rank per destination in a round (collective_args.h's
// ArgumentHeader fits).
inline constexpr size_t kMetaWords = 16;
// The negotiation area (shm_negotiation.h): this many bytes per rank, the
// first kNegotiationControlBytes of them its control line, then its two parts.
inline constexpr size_t kNegotiationControlBytes = 128;
inline constexpr size_t kNegotiationBytesPerRank = kNegotiationControlBytes + (size_t{64} << 10);

struct GroupOptions {
  int rank = 0;  // this process's index in the group (its local rank)
  int size = 1;  // the host's local ranks
  size_t slot_bytes = kDefaultSlotBytes;
  // Each local rank's process id, by index (liveness checks; this process's
  // own entry is not checked).
  std::vector<pid_t> pids;
};

class ShmGroup {
 public:
  // Bytes of the segment a group of these options needs.
  static size_t SegmentBytes(int size, size_t slot_bytes);
  // The leader (index 0) creates the segment; it publishes segment().fd().
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Create(const GroupOptions& options);
  // Every other index maps the leader's.
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Attach(const GroupOptions& options,
                                                         pid_t leader, int leader_fd);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // The leader creates the group before it learns its peers' pids.
  void SetPids(std::vector<pid_t> pids);

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  SharedSegment& segment() { return *segment_; }

  // This round's buffers: rank r's data slot and header words (kMetaWords
  // per destination rank).
  uint8_t* slot(int r) const;
  int64_t* meta(int r) const;
  // Arrives and waits until every rank arrived: what every rank wrote in
  // this round before its Sync is then readable. Errors: ABORTED (Abort),
  // UNAVAILABLE (a local peer died or a collective failed on a peer),
  // DEADLINE_EXCEEDED. After an error the group is dead on every local rank.
  absl::Status Sync(absl::Time deadline);
  // Ends the round (after at least one Sync): the next one uses the other set.
  void NextRound() { ++round_; }

  // The negotiation channel's area (kNegotiationBytesPerRank per rank, zeros
  // at first), beside the rounds: it keeps its own counts.
  uint8_t* negotiation_area() const;
  // Waits, as Sync does (spin, then sleep until rung), until `done` holds;
  // `done` is called on this thread only. Same errors as Sync.
  absl::Status Await(absl::FunctionRef<bool()> done, absl::Time deadline);
  // Rings for the sleepers of the host, if any: call after publishing what
  // their Await looks for.
  void Notify();

  // OK while usable, else why not.
  absl::Status health() const;
  // Any thread, idempotent: every wait on the host fails ABORTED.
  void Abort();
  // A collective failed on this rank: every wait on the host fails UNAVAILABLE.
  void Fail();

 private:
  struct Header;
  struct RankControl;
  ShmGroup(const GroupOptions& options, std::unique_ptr<SharedSegment> segment);
  void ClosePidfds();
  Header& header() const;
  RankControl& control(int r) const;
  bool AllArrived(uint64_t round) const;
  void SetState(uint32_t state);
  // Which peer has exited, or -1.
  int DeadPeer() const;

  const int rank_;
  const int size_;
  const size_t slot_bytes_;
  std::unique_ptr<SharedSegment> segment_;
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;  // -1 for ourselves, or where pidfd_open failed
  // Collective thread only: rounds ended, and Syncs done.
  uint64_t round_ = 0;
  uint64_t syncs_ = 0;
};

}  // namespace horovodd::internal::shm
