#include "worker_runtime/shm/shm_group.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <new>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/shm/cpu_spread.h"

namespace horovodd::internal::shm {
namespace {

constexpr uint64_t kMagic = 0x68766464'73686d33ULL;  // "hvddshm3"
constexpr size_t kLine = 128;  // a cache line pair: no false sharing between ranks
constexpr size_t kPage = 4096;
// The spin before sleeping: checks with a pause between them, then checks
// with a yield between them (which lets a peer sharing our core run). With
// more local ranks than CPUs to run them, the peer we wait for is often
// queued behind us on our own CPU: pausing only delays it, so such a group
// goes straight to yielding (as OpenMPI does when oversubscribed).
constexpr int kSpinChecks = 2000;
constexpr int kYieldChecks = 200;
// With more ranks than this per CPU a wait sleeps at once: a yield almost
// always hands the CPU to another waiter that yields in turn (256 ranks on 2
// CPUs spent a tenth of a reset's CPU in sched_yield and the checks between),
// and the rank awaited runs sooner when the waiters sleep.
constexpr int kCrowdedRanksPerCpu = 8;
// How often (in pause-spins) a spinning wait checks whether a peer shares
// its CPU (a getcpu call).
constexpr int kCpuChecksEvery = 64;

// How many syncs on the host apart two moves of a crowded rank to another
// CPU (SpreadOut) are: enough for every rank to have waited, and so said
// where it runs now, since the last one.
constexpr uint64_t kSyncsBetweenMoves = 8;

// CPUs whose waiting ranks the header counts (PublishCpu): CPU_SETSIZE,
// every CPU sched_getcpu can name here. 4 KiB of the segment.
constexpr int kCountedCpus = CPU_SETSIZE;

// A round's vote word (VoteNo): the round's tag above the count of no-votes.
constexpr int kVoteCountBits = 24;
// Which round a vote word is of: its own, not one the set held kSets rounds before.
uint64_t VoteTag(uint64_t round) {
  return (round + 1) & ((uint64_t{1} << (64 - kVoteCountBits)) - 1);
}

// The CPUs this thread may run on.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

enum State : uint32_t { kUsable = 0, kAborted = 1, kFailed = 2 };
enum Agreement : uint32_t { kUndecided = 0, kEveryoneMapped = 1, kNotEveryone = 2 };

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The futex words are shared between processes: no FUTEX_PRIVATE_FLAG.
//
// Sleeps as `waiter` (a futex bitset) while *word == value, until woken or
// `deadline` (no timeout when it is infinite); a spurious return is fine,
// the caller looks again.
void FutexWait(std::atomic<uint32_t>* word, uint32_t value, absl::Time deadline, Waiters waiter) {
  // FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC.
  timespec at{};
  const timespec* timeout = nullptr;
  if (deadline != absl::InfiniteFuture()) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    at = absl::ToTimespec(absl::DurationFromTimespec(now) +
                          std::max(deadline - absl::Now(), absl::ZeroDuration()));
    timeout = &at;
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET, value, timeout, nullptr,
          waiter);
}

void FutexWake(std::atomic<uint32_t>* word, Waiters waiters) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_BITSET, INT_MAX, nullptr,
          nullptr, waiters);
}

size_t MetaBytes(int size) {
  return RoundUp(static_cast<size_t>(size) * size * kMetaWords * sizeof(int64_t), kLine);
}

}  // namespace

// Lock-free std::atomic words are address-free, so they work across
// processes mapping the same page.
struct alignas(kLine) ShmGroup::Header {
  uint64_t magic;
  uint64_t size;
  uint64_t slot_bytes;
  uint64_t rank_zero_decides;  // the creator's choice (GroupOptions)
  alignas(kLine) std::atomic<uint32_t> state;
  // 1 + the index of the first rank a PeerWatch saw exit, 0 while none did.
  std::atomic<uint32_t> exited;
  // syncs_ of the rank that last moved itself to an emptier CPU, when it did
  // (SpreadOut).
  alignas(kLine) std::atomic<uint64_t> last_move;
  // Arrivals at Syncs, all ranks together: every rank arrived at its k-th
  // Sync once it reaches k * size (none can arrive at the next before).
  alignas(kLine) std::atomic<uint64_t> arrivals;
  // The set-up's verdict (Decide): 0 until the leader gives it, then
  // kEveryoneMapped or kNotEveryone.
  alignas(kLine) std::atomic<uint32_t> agreement;
  // Bumped (and woken) whenever a sleeper may need to look again.
  alignas(kLine) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleepers;
  // How many ranks last said they wait on each CPU (PublishCpu): whether a
  // peer shares this rank's CPU, and which CPU is emptier, in O(CPUs) where
  // reading every rank's `cpu` made each crowded wait O(ranks).
  alignas(kLine) std::atomic<uint32_t> ranks_on_cpu[kCountedCpus];
  // Each set's round vote (VoteNo): VoteTag(round) << kVoteCountBits | the
  // ranks that said no in that round; a word tagged with an older round of
  // the set counts no one.
  alignas(kLine) std::atomic<uint64_t> no_votes[kSets];
};

struct alignas(kLine) ShmGroup::RankControl {
  // Syncs this rank has arrived at.
  std::atomic<uint64_t> arrived;
  // 1 + the CPU this rank last waited on (0: none yet). Only its rank
  // writes it (PublishCpu), keeping the header's per-CPU counts, which the
  // others read (SharesCpu, SpreadOut).
  std::atomic<uint32_t> cpu;
  // This rank's process, published when it maps the segment, for its
  // neighbours' watches (WatchNeighbours).
  std::atomic<int32_t> pid;
  // Waits that say they wait for this rank (a Sync with a PeerWait): its
  // arrival rings for them, so they move on to the next missing rank.
  std::atomic<uint32_t> awaited_by;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

size_t ShmGroup::SegmentBytes(int size, size_t slot_bytes) {
  const size_t control = sizeof(Header) + size * sizeof(RankControl);
  return RoundUp(control + kSets * MetaBytes(size), kPage) +
         kSets * size * RoundUp(slot_bytes, kLine) + kNegotiationHeaderBytes +
         size * kNegotiationBytesPerRank;
}

ShmGroup::ShmGroup(const GroupOptions& options, std::unique_ptr<SharedSegment> segment)
    : rank_(options.rank),
      size_(options.size),
      slot_bytes_(RoundUp(options.slot_bytes, kLine)),
      allowed_cpus_(AllowedCpus()),
      spin_checks_(options.size > std::max<int>(1, allowed_cpus_.size()) ? 0 : kSpinChecks),
      yield_checks_(options.size > kCrowdedRanksPerCpu * std::max<int>(1, allowed_cpus_.size())
                        ? 0
                        : kYieldChecks),
      segment_(std::move(segment)) {
  control(rank_).pid.store(static_cast<int32_t>(getpid()), std::memory_order_release);
  SetPids(options.pids);
}

// The watch goes first: its thread touches the segment.
ShmGroup::~ShmGroup() { watch_.reset(); }

void ShmGroup::SetPids(std::vector<pid_t> pids) {
  HVDD_CHECK_EQ(pids.size(), static_cast<size_t>(size_));
  pids_ = std::move(pids);
  // Only the neighbours: every local rank that dies has a live one among
  // its neighbours (unless all died), whose Fail() reaches every rank.
  std::vector<pid_t> watched(size_, 0);
  for (int r : Neighbours()) watched[r] = pids_[r];
  Watch(watched);
}

void ShmGroup::Watch(const std::vector<pid_t>& watched) {
  // One thread for the group's life: a peer's set-up changes what it
  // watches (the leader, then its neighbours), and with hundreds of ranks
  // on a few cores a thread started and joined per change is felt.
  if (watch_ != nullptr) {
    watch_->Rewatch(watched);
  } else {
    watch_ = PeerWatch::Start(watched, [this](int r) { PeerExited(r); });
  }
}

std::vector<int> ShmGroup::Neighbours() const {
  std::vector<int> neighbours;
  if (size_ < 2) return neighbours;
  neighbours.push_back((rank_ + size_ - 1) % size_);
  if (size_ > 2) neighbours.push_back((rank_ + 1) % size_);
  return neighbours;
}

void ShmGroup::WatchNeighbours() {
  std::vector<pid_t> pids = pids_;
  for (int r : Neighbours()) {
    pids[r] = static_cast<pid_t>(control(r).pid.load(std::memory_order_acquire));
  }
  SetPids(std::move(pids));
}

void ShmGroup::WatchLeader(pid_t leader) {
  HVDD_CHECK(rank_ != 0);
  std::vector<pid_t> watched(size_, 0);
  watched[0] = leader;
  Watch(watched);
}

void ShmGroup::Decide(bool everyone_mapped) {
  HVDD_CHECK(rank_ == 0);
  header().agreement.store(everyone_mapped ? kEveryoneMapped : kNotEveryone,
                           std::memory_order_seq_cst);
  Notify();
}

absl::StatusOr<bool> ShmGroup::AwaitDecision(absl::Time deadline) {
  const auto decided = [&] {
    return header().agreement.load(std::memory_order_acquire) != kUndecided;
  };
  HVDD_RETURN_IF_ERROR(Await(decided, deadline));
  return header().agreement.load(std::memory_order_acquire) == kEveryoneMapped;
}

size_t ShmGroup::watched_peers() const { return watch_ == nullptr ? 0 : watch_->size(); }

void ShmGroup::PeerExited(int r) {
  uint32_t none = 0;
  header().exited.compare_exchange_strong(none, static_cast<uint32_t>(r) + 1);
  Fail();
}

absl::StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::Create(const GroupOptions& options) {
  HVDD_CHECK(options.size >= 1 && options.rank == 0 &&
             options.pids.size() == static_cast<size_t>(options.size));
  HVDD_ASSIGN_OR_RETURN(std::unique_ptr<SharedSegment> segment,
                        SharedSegment::Create(SegmentBytes(options.size, options.slot_bytes)));
  // A fresh memfd reads as zeros: every counter starts at 0.
  auto* header = new (segment->data()) Header();
  header->magic = kMagic;
  header->size = options.size;
  header->slot_bytes = options.slot_bytes;
  header->rank_zero_decides =
      options.rank_zero_decides_from > 0 && options.size >= options.rank_zero_decides_from;
  for (int r = 0; r < options.size; ++r) {
    new (segment->data() + sizeof(Header) + r * sizeof(RankControl)) RankControl();
  }
  return std::unique_ptr<ShmGroup>(new ShmGroup(options, std::move(segment)));
}

absl::StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::Attach(const GroupOptions& options,
                                                           pid_t leader, int leader_fd) {
  HVDD_CHECK(options.size >= 1 && options.rank > 0 && options.rank < options.size &&
             options.pids.size() == static_cast<size_t>(options.size));
  HVDD_ASSIGN_OR_RETURN(
      std::unique_ptr<SharedSegment> segment,
      SharedSegment::OpenPeer(leader, leader_fd, SegmentBytes(options.size, options.slot_bytes)));
  const auto* header = reinterpret_cast<const Header*>(segment->data());
  if (header->magic != kMagic || header->size != static_cast<uint64_t>(options.size) ||
      header->slot_bytes != options.slot_bytes) {
    return absl::FailedPreconditionError(
        "the local leader's segment is not laid out for this group");
  }
  return std::unique_ptr<ShmGroup>(new ShmGroup(options, std::move(segment)));
}

bool ShmGroup::rank_zero_decides() const { return header().rank_zero_decides != 0; }

ShmGroup::Header& ShmGroup::header() const { return *reinterpret_cast<Header*>(segment_->data()); }

ShmGroup::RankControl& ShmGroup::control(int r) const {
  return *reinterpret_cast<RankControl*>(segment_->data() + sizeof(Header) +
                                         r * sizeof(RankControl));
}

int64_t* ShmGroup::meta(int r) const {
  const size_t base = sizeof(Header) + size_ * sizeof(RankControl);
  const size_t set = round_ % kSets;
  return reinterpret_cast<int64_t*>(segment_->data() + base + set * MetaBytes(size_)) +
         static_cast<size_t>(r) * size_ * kMetaWords;
}

uint8_t* ShmGroup::slot(int r) const { return SlotOf(r, round_); }
uint8_t* ShmGroup::next_slot(int r) const { return SlotOf(r, round_ + 1); }

uint8_t* ShmGroup::SlotOf(int r, uint64_t round) const {
  const size_t control = sizeof(Header) + size_ * sizeof(RankControl);
  const size_t data = RoundUp(control + kSets * MetaBytes(size_), kPage);
  const size_t set = round % kSets;
  return segment_->data() + data + (set * size_ + r) * slot_bytes_;
}

uint8_t* ShmGroup::negotiation_area() const {
  const size_t control = sizeof(Header) + size_ * sizeof(RankControl);
  const size_t data = RoundUp(control + kSets * MetaBytes(size_), kPage);
  return segment_->data() + data + kSets * size_ * slot_bytes_;
}

absl::Status ShmGroup::health() const {
  const uint32_t state = header().state.load(std::memory_order_acquire);
  if (state == kUsable) return absl::OkStatus();
  if (state == kAborted) {
    return absl::AbortedError("the shared-memory group of this host was aborted");
  }
  if (const uint32_t exited = header().exited.load(std::memory_order_acquire); exited > 0) {
    const int r = static_cast<int>(exited) - 1;
    return absl::UnavailableError(absl::StrCat(
        "local rank ", r, " (pid ", pids_[r], ") exited while its shared-memory group was in use"));
  }
  return absl::UnavailableError(
      "a collective failed on a rank of this host (its shared-memory group is dead)");
}

uint32_t ShmGroup::sleepers() const { return header().sleepers.load(std::memory_order_acquire); }

void ShmGroup::SetState(uint32_t state) {
  uint32_t expected = kUsable;
  header().state.compare_exchange_strong(expected, state);
  header().bell.fetch_add(1);
  FutexWake(&header().bell, kEveryWait);
}

void ShmGroup::Abort() { SetState(kAborted); }
void ShmGroup::Fail() { SetState(kFailed); }

absl::Status ShmGroup::Sync(absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(health());
  const uint64_t round = ++syncs_;
  // Per rank, for the waits that say whom they wait for (below).
  control(rank_).arrived.store(round, std::memory_order_seq_cst);
  // One shared count, and only the last arrival rings (or one a wait names,
  // below): a Sync of n ranks wakes the sleepers about once, not once per
  // arrival (n wake-ups of up to n - 1 sleepers each, which at hundreds of
  // ranks on a few CPUs was most of a Sync), and a look is one load.
  const uint64_t all = round * static_cast<uint64_t>(size_);
  const bool last = header().arrivals.fetch_add(1, std::memory_order_seq_cst) + 1 == all;
  if (last || control(rank_).awaited_by.load(std::memory_order_seq_cst) > 0) Notify();
  if (last) return absl::OkStatus();
  const auto everyone_arrived = [&] {
    return header().arrivals.load(std::memory_order_seq_cst) >= all;
  };
  if (peer_wait_ == nullptr) return Await(everyone_arrived, deadline);
  // A look that finds a peer missing enters the wait (a clock read, two
  // stores), a later one that finds another redirects it (one store). The
  // first missing rank only moves up, so the scans of one wait add up to
  // one pass over the ranks. The rank waited for knows it (awaited_by), so
  // its arrival wakes this wait to name the next one.
  int awaited = -1;
  int scan_from = 0;
  const absl::Status status = Await(
      [&] {
        if (everyone_arrived()) return true;
        while (scan_from < size_ &&
               control(scan_from).arrived.load(std::memory_order_seq_cst) >= round) {
          ++scan_from;
        }
        if (scan_from < size_ && scan_from != awaited) {
          control(scan_from).awaited_by.fetch_add(1, std::memory_order_seq_cst);
          if (awaited < 0) {
            peer_wait_->Enter(scan_from);
          } else {
            control(awaited).awaited_by.fetch_sub(1, std::memory_order_seq_cst);
            peer_wait_->Redirect(scan_from);
          }
          // Await looks again before it sleeps: an arrival that missed the
          // count above is seen then.
          awaited = scan_from;
        }
        return false;
      },
      deadline);
  if (awaited >= 0) {
    control(awaited).awaited_by.fetch_sub(1, std::memory_order_seq_cst);
    peer_wait_->Leave();
  }
  return status;
}

void ShmGroup::Notify(Waiters waiters) {
  Header& h = header();
  if (h.sleepers.load(std::memory_order_seq_cst) > 0) {
    h.bell.fetch_add(1, std::memory_order_seq_cst);
    FutexWake(&h.bell, waiters);
  }
}

void ShmGroup::PublishCpu(int cpu) {
  HVDD_CHECK(cpu >= 0);
  const uint32_t now = static_cast<uint32_t>(cpu) + 1;
  const uint32_t was = control(rank_).cpu.exchange(now, std::memory_order_relaxed);
  if (was == now) return;
  if (was != 0 && was - 1 < static_cast<uint32_t>(kCountedCpus)) {
    header().ranks_on_cpu[was - 1].fetch_sub(1, std::memory_order_relaxed);
  }
  if (cpu < kCountedCpus) header().ranks_on_cpu[cpu].fetch_add(1, std::memory_order_relaxed);
}

void ShmGroup::VoteNo() {
  std::atomic<uint64_t>& word = header().no_votes[round_ % kSets];
  const uint64_t tag = VoteTag(round_);
  uint64_t seen = word.load(std::memory_order_relaxed);
  // The first no of the round replaces the word of the set's last round: every
  // peer read that one before it arrived at the Sync this rank has passed since.
  while (!word.compare_exchange_weak(
      seen, (seen >> kVoteCountBits) == tag ? seen + 1 : (tag << kVoteCountBits) | 1,
      std::memory_order_relaxed)) {
  }
}

int ShmGroup::no_votes() const {
  const uint64_t word = header().no_votes[round_ % kSets].load(std::memory_order_relaxed);
  if ((word >> kVoteCountBits) != VoteTag(round_)) return 0;
  return static_cast<int>(word & ((uint64_t{1} << kVoteCountBits) - 1));
}

int ShmGroup::ranks_waiting_on(int cpu) const {
  if (cpu < 0 || cpu >= kCountedCpus) return 0;
  return static_cast<int>(header().ranks_on_cpu[cpu].load(std::memory_order_relaxed));
}

bool ShmGroup::SharesCpu(int cpu) {
  if (cpu < 0) return false;
  PublishCpu(cpu);
  return ranks_waiting_on(cpu) > 1;  // this rank and another
}

void ShmGroup::SpreadOut() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  PublishCpu(cpu);
  uint64_t last = header().last_move.load(std::memory_order_relaxed);
  if (syncs_ < last + kSyncsBetweenMoves) return;
  // Every wait of such a group gets here: no allocation up to 16 CPUs.
  absl::InlinedVector<int, 16> ranks_on(allowed_cpus_.size());
  for (size_t i = 0; i < allowed_cpus_.size(); ++i) {
    // A CPU the header does not count is never a target.
    ranks_on[i] = allowed_cpus_[i] < kCountedCpus ? ranks_waiting_on(allowed_cpus_[i]) : size_;
  }
  const int target = EmptierCpu(cpu, ranks_waiting_on(cpu), size_, allowed_cpus_, ranks_on);
  if (target < 0) return;
  // One rank moves at a time: the others see it there before they judge.
  if (!header().last_move.compare_exchange_strong(last, syncs_)) return;
  // Pinning to the target moves this thread there at once; the thread's
  // own mask comes straight back, so the kernel stays free to place it.
  cpu_set_t own;
  if (sched_getaffinity(0, sizeof(own), &own) != 0 || !CPU_ISSET(target, &own)) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(target, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return;
  sched_setaffinity(0, sizeof(own), &own);
  ++cpu_moves_;
  PublishCpu(target);
}

absl::Status ShmGroup::Await(absl::FunctionRef<bool()> done, absl::Time deadline,
                             absl::Duration recheck, Waiters waiter) {
  Header& h = header();
  // Spinning only helps while the peers run on other CPUs. Two local ranks
  // that the kernel put on one CPU (it does, for tens of milliseconds at a
  // time, with the other CPU idle: they look cache-hot to its balancer)
  // would spin in turn, each burning its time slice while the other waits
  // to run: 2 ranks at 1 MiB took 400-600 us an op in such stretches
  // against 160. So a wait that finds a peer on its own CPU sleeps at once:
  // the CPU goes to the peer, and the wake-up that ends the sleep places
  // this rank on an idle CPU if there is one.
  //
  // With more local ranks than CPUs a wait yields instead of spinning (the
  // peer it waits for may be queued on its CPU), and first says where it
  // runs, moving itself where its CPU holds more than its share of the
  // host's ranks (cpu_spread.h). With more than kCrowdedRanksPerCpu it
  // does not yield either: it sleeps at once.
  if (spin_checks_ == 0) SpreadOut();
  for (int i = 0; i < spin_checks_ + yield_checks_; ++i) {
    if (done()) return absl::OkStatus();
    if (h.state.load(std::memory_order_relaxed) != kUsable) return health();
    if (i < spin_checks_) {
      if (i % kCpuChecksEvery == 0 && SharesCpu(sched_getcpu())) {
        ++shared_cpu_sleeps_;
        break;
      }
      CpuRelax();
    } else {
      sched_yield();
    }
  }
  while (true) {
    // Counted as a sleeper before the last look: an arrival after it sees
    // us and rings (seq_cst orders the two sides). A peer's exit, an abort
    // or a failure rings too (SetState), so the sleep needs no timeout
    // besides the deadline.
    h.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t bell = h.bell.load(std::memory_order_seq_cst);
    absl::Status status = health();
    const bool finished = status.ok() && done();
    const bool late = absl::Now() >= deadline;
    if (status.ok() && !finished && !late) {
      FutexWait(&h.bell, bell, std::min(deadline, absl::Now() + recheck), waiter);
    }
    h.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (!status.ok()) return status;
    if (finished || done()) return absl::OkStatus();
    HVDD_RETURN_IF_ERROR(health());
    if (late) {
      Fail();
      return absl::DeadlineExceededError("timed out waiting for the local ranks in shared memory");
    }
  }
}

}  // namespace horovodd::internal::shm
