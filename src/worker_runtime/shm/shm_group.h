// The ranks of one host sharing one segment (shm_segment.h): its layout, the
// rounds every collective on it is made of, and the waits that end on an
// abort, a dead peer or the deadline instead of blocking for ever.
//
// A round: every rank writes what it shares into its own slot (and its
// header words) of the round's buffer set, then Sync(): after it, every rank
// may read every slot of that set (a round may Sync more than once, e.g. to
// read what peers reduced in place). NextRound() moves to the next of
// kSets sets. Every round Syncs at least once, so a rank writing round k + 2
// has seen every peer arrive in round k + 1, which they do only after they
// finished reading round k: two sets would do. The third is for rounds that
// overlap: a rank writing round k + 3 has seen every peer arrive in round
// k + 2, after they finished round k, which lets a reduction fill round
// k + 1 (next_slot) while it still reads round k, so that one Sync per round
// does. Every rank runs the same rounds and Syncs in the same order
// (one collective thread per rank, as on the Gloo ring).
//
// A wait spins briefly (peers on one host answer in microseconds), then
// sleeps on a futex in the segment until it is rung or the deadline passes.
// It sleeps at once where a peer last waited on its own CPU: spinning there
// only keeps the peer from running. With more local ranks than CPUs it
// yields instead of spinning (many times more: it sleeps at once), and a
// rank on a CPU the kernel crowded with more than its share of them moves
// itself to an emptier one.
// Abort() (the generation was superseded) and Fail() (a collective failed
// here) set the segment's state word and ring: every wait of every local
// rank then fails at once, and so does every later one. A local peer's exit
// does the same: each process's PeerWatch (peer_watch.h) watches its two
// neighbours among the local ranks (local rank - 1 and + 1, round the
// host) and fails the group the moment one's pidfd turns readable, so no
// wait polls for it. Watching neighbours only keeps a host's set-up linear
// in its ranks; a rank that dies always has a live neighbour to notice,
// unless every other rank died with it.
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
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/shm/peer_watch.h"
#include "worker_runtime/shm/shm_segment.h"

namespace horovodd::internal::shm {

// Bytes per rank per round for collective data. A chunk of this size is
// copied in, reduced and copied out while it is still in the cache: a
// round's slots of 2-3 ranks fit a 1 MiB L2. Against 1 MiB slots (bench/
// shm_allreduce.cc, 3 interleaved runs on the 2-core VM): 4 ranks 16 MiB
// 14-17 ms against 18-20, 64 MiB 55-65 against 72-77; 2 ranks level or
// better.
inline constexpr size_t kDefaultSlotBytes = size_t{256} << 10;
// Header words per rank per destination in a round (collective_args.h's
// ArgumentHeader fits).
inline constexpr size_t kMetaWords = 16;
// The negotiation area (shm_negotiation.h): this many bytes per rank, its
// front (a control line and room for a small part in each of the two sets,
// the fronts of all ranks side by side) and its two full parts.
inline constexpr size_t kNegotiationFrontBytes = 512;
inline constexpr size_t kNegotiationBytesPerRank = kNegotiationFrontBytes + (size_t{64} << 10);
// Before the ranks' fronts: the area's own line (its counts), then the
// result of a round that one rank decided for the host (shm_negotiation.h).
inline constexpr size_t kNegotiationHeaderBytes = size_t{32} << 10;
// Buffer sets, used round after round in turn (see the top).
inline constexpr int kSets = 3;

// Who a wait is, for a ring meant for some waits only (Await, Notify): a
// wait sleeps as `waiter` and a ring wakes the waits in `waiters` (a futex
// bitset). A failure, an abort or a dead peer wakes every wait.
using Waiters = uint32_t;
inline constexpr Waiters kEveryWait = ~Waiters{0};
inline constexpr Waiters kRoundDecider = 1;     // waits for every rank's negotiation part
inline constexpr Waiters kRoundResultWait = 2;  // waits for the decider's result

// From this many local ranks, rank 0 decides each negotiation round for the
// host (shm_negotiation.h); below it every rank decides from every part,
// which spares the round a second wake-up where reading the parts is cheap.
// bench reset on the 2-core VM, medians of 3: level from 8 to 32 local
// ranks; 99 against 108 ms at 64, 216 against 255 at 128, 552 against 724
// at 256 (each survivor's CPU 3.7 against 4.7 ms).
inline constexpr int kRankZeroDecidesFrom = 32;

struct GroupOptions {
  int rank = 0;  // this process's index in the group (its local rank)
  int size = 1;  // the host's local ranks
  size_t slot_bytes = kDefaultSlotBytes;
  // The creator's choice, kept in the segment so every rank takes it: rank
  // 0 decides the negotiation rounds from this many ranks (0: never).
  int rank_zero_decides_from = kRankZeroDecidesFrom;
  // Each local rank's process id, by index, where known: this rank's
  // neighbours' are watched for exits (entries <= 0 and this process's own
  // are not).
  std::vector<pid_t> pids;
};

class ShmGroup {
 public:
  // Bytes of the segment a group of these options needs.
  static size_t SegmentBytes(int size, size_t slot_bytes);
  // The leader (index 0) creates the segment; it publishes segment().fd().
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Create(const GroupOptions& options);
  // Every other index maps the leader's.
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Attach(const GroupOptions& options, pid_t leader,
                                                          int leader_fd);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // The leader creates the group before it learns its peers' pids. Turns
  // the watch to the new pids (its neighbours').
  void SetPids(std::vector<pid_t> pids);
  // Turns the watch to the pids the neighbours published in the
  // segment when they mapped it: once every local rank has (a group set up
  // without anyone's pids).
  void WatchNeighbours();
  // While the group is set up (not the leader): watches the leader alone,
  // whose death fails the group, until WatchNeighbours.
  void WatchLeader(pid_t leader);
  // The leader's verdict on the set-up, for every rank that mapped the
  // segment: whether every local rank did. Given once.
  void Decide(bool everyone_mapped);
  // Waits (as Sync does) for the leader's verdict. Same errors as Sync.
  absl::StatusOr<bool> AwaitDecision(absl::Time deadline);
  // The local ranks this one watches: local rank - 1 and + 1, round the host.
  std::vector<int> Neighbours() const;
  // How many processes this rank's watch looks at (tests, diagnostics).
  size_t watched_peers() const;
  // Where the group's indices are the job's ranks (every rank of the job on
  // this host): each Sync that has to wait records the first peer not
  // arrived in `wait` (comm/peer_wait.h), for the daemon's stall detector.
  // Set before the first Sync; `wait` outlives the group.
  void set_peer_wait(PeerWait* wait) { peer_wait_ = wait; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Whether rank 0 decides the negotiation rounds (GroupOptions), as the
  // creator chose.
  bool rank_zero_decides() const;
  SharedSegment& segment() { return *segment_; }

  // This round's buffers: rank r's data slot and header words (kMetaWords
  // per destination rank).
  uint8_t* slot(int r) const;
  int64_t* meta(int r) const;
  // Rank r's data slot of the next round, for a collective that fills round
  // k + 1 while it still reduces round k. Only after round k's first Sync:
  // the next round's set is round k - 2's, which every peer finished reading
  // before it arrived there.
  uint8_t* next_slot(int r) const;
  // Arrives and waits until every rank arrived: what every rank wrote in
  // this round before its Sync is then readable. Errors: ABORTED (Abort),
  // UNAVAILABLE (a local peer died or a collective failed on a peer),
  // DEADLINE_EXCEEDED. After an error the group is dead on every local rank.
  absl::Status Sync(absl::Time deadline);
  // A yes/no question every rank answers in a round: each rank that says no
  // calls VoteNo before the round's first Sync, and after it every rank reads
  // how many did. One shared word, where a word in every rank's header row
  // had each rank read a page of every peer's.
  void VoteNo();
  int no_votes() const;
  // Ends the round (after at least one Sync): the next one uses the next set.
  void NextRound() { ++round_; }

  // The negotiation channel's area (kNegotiationHeaderBytes, then
  // kNegotiationBytesPerRank per rank, zeros at first), beside the rounds:
  // it keeps its own counts.
  uint8_t* negotiation_area() const;
  // Waits, as Sync does (spin, then sleep until rung), until `done` holds;
  // `done` is called on this thread only. Same errors as Sync. A sleep also
  // ends every `recheck` (for a `done` that notes progress nobody rings for).
  // It sleeps as `waiter`: a Notify for other waiters does not wake it.
  absl::Status Await(absl::FunctionRef<bool()> done, absl::Time deadline,
                     absl::Duration recheck = absl::InfiniteDuration(),
                     Waiters waiter = kEveryWait);
  // Rings for the sleepers of the host among `waiters`, if any sleeps: call
  // after publishing what their Await looks for.
  void Notify(Waiters waiters = kEveryWait);
  // How many waits on the host sleep on the futex now (tests, diagnostics).
  uint32_t sleepers() const;
  // Waits of this rank that slept without spinning because another local
  // rank had last waited on the same CPU (collective thread; tests).
  uint64_t shared_cpu_sleeps() const { return shared_cpu_sleeps_; }
  // Times this rank moved itself to an emptier CPU (SpreadOut; collective
  // thread; tests, diagnostics).
  uint64_t cpu_moves() const { return cpu_moves_; }
  // How many local ranks last said they wait on `cpu` (the waits' SharesCpu
  // and SpreadOut read it; tests, diagnostics).
  int ranks_waiting_on(int cpu) const;

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
  Header& header() const;
  RankControl& control(int r) const;
  // Says this rank waits on `cpu` (>= 0): its `cpu` word and the header's
  // count of ranks per CPU.
  void PublishCpu(int cpu);
  // Publishes that this rank waits on `cpu`; whether another local rank
  // last said it waits on the same one.
  bool SharesCpu(int cpu);
  // With more local ranks than CPUs, at the start of a wait: publishes this
  // rank's CPU, and moves this thread to an emptier CPU where cpu_spread.h
  // says so (one rank of the host at a time).
  void SpreadOut();
  uint8_t* SlotOf(int r, uint64_t round) const;
  void SetState(uint32_t state);
  // From the watch's thread: local rank r exited; the group fails.
  void PeerExited(int r);
  // Watches watched[r] for each r whose pid is set (PeerWatch::Start),
  // instead of what was watched before.
  void Watch(const std::vector<pid_t>& watched);

  const int rank_;
  const int size_;
  const size_t slot_bytes_;
  // The CPUs the creating thread may run on.
  const std::vector<int> allowed_cpus_;
  // Pause-spins before a wait yields: none when the host's ranks outnumber
  // the CPUs we may run on.
  const int spin_checks_;
  // Yields before a wait sleeps: none when the host's ranks outnumber the
  // CPUs many times over.
  const int yield_checks_;
  std::unique_ptr<SharedSegment> segment_;
  std::vector<pid_t> pids_;
  // Collective thread only: rounds ended, and Syncs done.
  uint64_t round_ = 0;
  uint64_t syncs_ = 0;
  uint64_t shared_cpu_sleeps_ = 0;
  uint64_t cpu_moves_ = 0;
  PeerWait* peer_wait_ = nullptr;
  // Last: destroyed first, while the segment its thread touches is mapped.
  std::unique_ptr<PeerWatch> watch_;
};

}  // namespace horovodd::internal::shm
