#include "worker_runtime/shm/shm_negotiation.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/status_macros.h"

namespace horovodd::internal::shm {

// The area: its counts on a line of their own, the result of a round rank 0
// decided, every rank's front, side by side, then every rank's two full
// parts. A round's part is mostly a header, a response cache's bitset and a
// few new names, which fit the front: a rank collecting a round then reads
// the fronts laid end to end (256 ranks: 32 pages) instead of a page in
// every peer's own stretch, which cost the host 65,000 page faults in a
// generation's first round at 256 local ranks. Only a bigger part is read
// from its full part.
struct alignas(64) NegotiationChannel::RankControl {
  // Rounds this rank has published; its part of round k (counted from 1)
  // is readable once this is k.
  std::atomic<uint64_t> published;
  // The size of the part in each set, written before `published`.
  uint64_t bytes[2];
};

struct NegotiationChannel::AreaControl {
  // Every rank's publishes, all rounds together.
  std::atomic<uint64_t> publishes;
  // Where rank 0 decides: the last round it gave its word on (counted from
  // 1), written after `result_bytes`.
  std::atomic<uint64_t> decided;
  // That round's result size, or kEveryRankDecides.
  uint64_t result_bytes;
};

namespace {

constexpr size_t kControlBytes = 64;
constexpr uint64_t kEveryRankDecides = ~uint64_t{0};
// How soon a rank collecting a round notes peers that published (nobody
// rings before the last): the stall check names the ranks still missing
// after a minute by default (HOROVOD_STALL_CHECK_TIME_SECONDS, whole
// seconds in practice).
constexpr absl::Duration kArrivalRecheck = absl::Milliseconds(250);
constexpr size_t kFrontPartBytes = (kNegotiationFrontBytes - kControlBytes) / 2;

}  // namespace

static_assert(kNegotiationFrontBytes + 2 * NegotiationChannel::kPartBytes <=
              kNegotiationBytesPerRank);

NegotiationChannel::NegotiationChannel(ShmGroup& group)
    : group_(group),
      rank_zero_decides_(group.rank_zero_decides()),
      area_(group.negotiation_area()),
      fronts_(area_ + kNegotiationHeaderBytes) {
  static_assert(sizeof(AreaControl) <= kNegotiationHeaderBytes - kResultBytes);
  static_assert(sizeof(RankControl) <= kControlBytes);
}

NegotiationChannel::AreaControl& NegotiationChannel::area_control() const {
  // A fresh memfd reads as zeros: every count starts at 0.
  return *reinterpret_cast<AreaControl*>(area_);
}

NegotiationChannel::RankControl& NegotiationChannel::control(int r) const {
  return *reinterpret_cast<RankControl*>(fronts_ + static_cast<size_t>(r) * kNegotiationFrontBytes);
}

uint8_t* NegotiationChannel::front_part(int r, uint64_t round) const {
  return fronts_ + static_cast<size_t>(r) * kNegotiationFrontBytes + kControlBytes +
         (round % 2) * kFrontPartBytes;
}

uint8_t* NegotiationChannel::part(int r, uint64_t round) const {
  return fronts_ + static_cast<size_t>(size()) * kNegotiationFrontBytes +
         static_cast<size_t>(r) * 2 * kPartBytes + (round % 2) * kPartBytes;
}

uint8_t* NegotiationChannel::NextPart() {
  // Writing this set is safe only once every peer has read it two rounds ago.
  HVDD_CHECK_EQ(collected_, published_) << "the last negotiation round was not collected";
  return part(rank(), published_);
}

void NegotiationChannel::Publish(size_t bytes) {
  HVDD_CHECK_EQ(collected_, published_) << "the last negotiation round was not collected";
  HVDD_CHECK_LE(bytes, kPartBytes);
  RankControl& mine = control(rank());
  if (bytes <= kFrontPartBytes) {
    std::memcpy(front_part(rank(), published_), part(rank(), published_), bytes);
  }
  mine.bytes[published_ % 2] = bytes;
  ++published_;
  mine.published.store(published_, std::memory_order_seq_cst);
  // Only the round's last publish rings, as only a Sync's last arrival
  // does: ringing at each woke every rank collecting already, n times a
  // round (at 256 local ranks, 32,000 wake-ups for one round). Publishes
  // of all rounds count together: no rank publishes round k + 1 before
  // every rank published round k, so the count reaches k * n exactly once.
  // Where rank 0 decides, only it collects.
  const uint64_t all = published_ * static_cast<uint64_t>(size());
  if (area_control().publishes.fetch_add(1, std::memory_order_seq_cst) + 1 == all) {
    group_.Notify(rank_zero_decides_ ? kRoundDecider : kEveryWait);
  }
}

void NegotiationChannel::NoteArrivals(uint64_t round, std::vector<bool>& seen, int& missing,
                                      absl::FunctionRef<void(int)> arrived) const {
  for (int r = 0; r < size(); ++r) {
    if (seen[r] || control(r).published.load(std::memory_order_acquire) < round) continue;
    seen[r] = true;
    --missing;
    arrived(r);
  }
}

absl::Status NegotiationChannel::Collect(absl::Time deadline,
                                         absl::FunctionRef<void(int)> arrived) {
  HVDD_CHECK_EQ(collected_ + 1, published_) << "no negotiation round to collect";
  const uint64_t round = published_;
  std::vector<bool> seen(size(), false);
  seen[rank()] = true;
  int missing = size() - 1;
  absl::Status status = group_.Await(
      [&] {
        NoteArrivals(round, seen, missing, arrived);
        return missing == 0;
      },
      deadline, kArrivalRecheck, rank_zero_decides_ && rank() == 0 ? kRoundDecider : kEveryWait);
  if (status.ok()) collected_ = round;
  return status;
}

uint8_t* NegotiationChannel::ResultBuffer() {
  HVDD_CHECK(rank_zero_decides_ && rank() == 0) << "only rank 0 decides a round";
  return area_ + (kNegotiationHeaderBytes - kResultBytes);
}

void NegotiationChannel::PublishResult(std::optional<size_t> bytes) {
  HVDD_CHECK(rank_zero_decides_ && rank() == 0) << "only rank 0 decides a round";
  HVDD_CHECK(collected_ == published_ && decided_ + 1 == collected_)
      << "a round's result goes out once, after it was collected";
  HVDD_CHECK(!bytes.has_value() || *bytes <= kResultBytes);
  AreaControl& area = area_control();
  area.result_bytes = bytes.has_value() ? *bytes : kEveryRankDecides;
  decided_ = collected_;
  area.decided.store(decided_, std::memory_order_seq_cst);
  group_.Notify(kRoundResultWait);
}

absl::StatusOr<std::optional<absl::Span<const uint8_t>>> NegotiationChannel::AwaitResult(
    absl::Time deadline, absl::FunctionRef<void(int)> arrived) {
  HVDD_CHECK(rank_zero_decides_ && rank() != 0) << "rank 0 decides the round, the others wait";
  HVDD_CHECK_EQ(collected_ + 1, published_) << "no negotiation round to wait for";
  const uint64_t round = published_;
  const AreaControl& area = area_control();
  // Rank 0 decides round k only after every rank published it: the word it
  // gives is this round's, never a later one's.
  const auto decided = [&] { return area.decided.load(std::memory_order_acquire) >= round; };
  // Only a long wait looks at who has published (the stall check's): a
  // round that is decided at once reads one word.
  std::vector<bool> seen;
  int missing = size() - 1;
  const absl::Time heard_from = absl::Now() + kArrivalRecheck;
  HVDD_RETURN_IF_ERROR(group_.Await(
      [&] {
        if (decided()) return true;
        if (absl::Now() >= heard_from) {
          if (seen.empty()) {
            seen.assign(size(), false);
            seen[rank()] = true;
          }
          NoteArrivals(round, seen, missing, arrived);
        }
        return false;
      },
      deadline, kArrivalRecheck, kRoundResultWait));
  const uint64_t bytes = area.result_bytes;
  if (bytes == kEveryRankDecides) return std::nullopt;  // Collect next
  collected_ = round;
  return absl::Span<const uint8_t>(area_ + (kNegotiationHeaderBytes - kResultBytes),
                                   std::min<uint64_t>(bytes, kResultBytes));
}

absl::Span<const uint8_t> NegotiationChannel::Part(int r) const {
  HVDD_CHECK(collected_ == published_ && collected_ > 0) << "no negotiation round collected";
  const uint64_t round = collected_ - 1;
  // Our own processes wrote it, but a size past the slot must not read past it.
  const size_t bytes = std::min<uint64_t>(control(r).bytes[round % 2], kPartBytes);
  if (bytes <= kFrontPartBytes) return absl::Span<const uint8_t>(front_part(r, round), bytes);
  return absl::Span<const uint8_t>(part(r, round), bytes);
}

}  // namespace horovodd::internal::shm
