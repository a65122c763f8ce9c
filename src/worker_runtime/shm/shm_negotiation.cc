#include "worker_runtime/shm/shm_negotiation.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "common/check.h"

namespace horovodd::internal::shm {

// At the start of each rank's stretch of the area, on a line of its own;
// the rank's two parts follow it.
struct alignas(kNegotiationControlBytes) NegotiationChannel::RankControl {
  // Rounds this rank has published; its part of round k (counted from 1)
  // is readable once this is k.
  std::atomic<uint64_t> published;
  // The size of the part in each set, written before `published`.
  uint64_t bytes[2];
};

static_assert(kNegotiationControlBytes + 2 * NegotiationChannel::kPartBytes <=
              kNegotiationBytesPerRank);

NegotiationChannel::NegotiationChannel(ShmGroup& group)
    : group_(group), area_(group.negotiation_area()) {
  static_assert(sizeof(RankControl) <= kNegotiationControlBytes);
}

NegotiationChannel::RankControl& NegotiationChannel::control(int r) const {
  // A fresh memfd reads as zeros: every count starts at 0.
  return *reinterpret_cast<RankControl*>(area_ + static_cast<size_t>(r) * kNegotiationBytesPerRank);
}

uint8_t* NegotiationChannel::part(int r, uint64_t round) const {
  return area_ + static_cast<size_t>(r) * kNegotiationBytesPerRank + kNegotiationControlBytes +
         (round % 2) * kPartBytes;
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
  mine.bytes[published_ % 2] = bytes;
  ++published_;
  mine.published.store(published_, std::memory_order_seq_cst);
  group_.Notify();
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
      deadline);
  if (status.ok()) collected_ = round;
  return status;
}

absl::Span<const uint8_t> NegotiationChannel::Part(int r) const {
  HVDD_CHECK(collected_ == published_ && collected_ > 0) << "no negotiation round collected";
  const uint64_t round = collected_ - 1;
  // Our own processes wrote it, but a size past the slot must not read past it.
  const size_t bytes = std::min<uint64_t>(control(r).bytes[round % 2], kPartBytes);
  return absl::Span<const uint8_t>(part(r, round), bytes);
}

}  // namespace horovodd::internal::shm
