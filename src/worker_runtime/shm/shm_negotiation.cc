#include "worker_runtime/shm/shm_negotiation.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "common/check.h"

namespace horovodd::internal::shm {

// The area: its count of publishes on a line of its own, every rank's
// front, side by side, then every rank's two full parts. A round's part is
// mostly a header, a response cache's bitset and a few new names, which fit
// the front: a rank collecting a round then reads the fronts laid end to end
// (256 ranks: 32 pages) instead of a page in every peer's own stretch, which
// cost the host 65,000 page faults in a generation's first round at 256
// local ranks. Only a bigger part is read from its full part.
struct alignas(64) NegotiationChannel::RankControl {
  // Rounds this rank has published; its part of round k (counted from 1)
  // is readable once this is k.
  std::atomic<uint64_t> published;
  // The size of the part in each set, written before `published`.
  uint64_t bytes[2];
};

namespace {

constexpr size_t kControlBytes = 64;
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
    : group_(group), area_(group.negotiation_area()), fronts_(area_ + kNegotiationHeaderBytes) {
  static_assert(sizeof(std::atomic<uint64_t>) <= kNegotiationHeaderBytes);
  static_assert(sizeof(RankControl) <= kControlBytes);
}

std::atomic<uint64_t>& NegotiationChannel::publishes() const {
  // A fresh memfd reads as zeros: every count starts at 0.
  return *reinterpret_cast<std::atomic<uint64_t>*>(area_);
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
  const uint64_t all = published_ * static_cast<uint64_t>(size());
  if (publishes().fetch_add(1, std::memory_order_seq_cst) + 1 == all) group_.Notify();
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
        for (int r = 0; r < size(); ++r) {
          if (seen[r] || control(r).published.load(std::memory_order_acquire) < round) continue;
          seen[r] = true;
          --missing;
          arrived(r);
        }
        return missing == 0;
      },
      deadline, kArrivalRecheck);
  if (status.ok()) collected_ = round;
  return status;
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
