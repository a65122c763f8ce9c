// The engine's negotiation rounds among the ranks of one host
// (comm/negotiator.h), in their segment's negotiation area
// (shm/shm_negotiation.h: a slot per rank, one wait per round, room for
// about 30 KiB of announcements; with many local ranks rank 0 decides and
// the others wait for its result); the second exchange, for announcements
// that did not fit, is an allgather in the group's rounds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/negotiator.h"
#include "worker_runtime/shm/shm_negotiation.h"

namespace horovodd::internal {

class ShmCommunicator;

class ShmNegotiator final : public Negotiator {
 public:
  // The rounds of `owner`'s group; `owner` must outlive the negotiator.
  explicit ShmNegotiator(ShmCommunicator& owner);
  ShmNegotiator(const ShmNegotiator&) = delete;
  ShmNegotiator& operator=(const ShmNegotiator&) = delete;

  int rank() const override { return channel_.rank(); }
  int size() const override { return channel_.size(); }
  absl::StatusOr<PartBuffer> StartRound(size_t header_bytes) override;
  absl::Status Post(size_t bytes) override;
  absl::Status Collect(absl::FunctionRef<void(int rank)> arrived) override;
  absl::Span<const uint8_t> Part(int r) const override { return channel_.Part(r); }
  absl::StatusOr<const uint8_t*> ExchangeLater(absl::Span<const size_t> bytes_by_rank,
                                               absl::string_view mine) override;
  int decider() const override { return channel_.rank_zero_decides() ? 0 : kEveryRank; }
  absl::Span<uint8_t> ResultBuffer() override;
  absl::Status PostResult(std::optional<size_t> bytes) override;
  absl::StatusOr<std::optional<absl::Span<const uint8_t>>> AwaitResult(
      absl::FunctionRef<void(int rank)> arrived) override;
  absl::Status EndRound(size_t /*next_header_bytes*/) override;
  void AbandonRound() override { later_ = Tensor(); }

 private:
  ShmCommunicator& owner_;
  shm::NegotiationChannel channel_;
  absl::Time deadline_;  // of the round in progress
  Tensor later_;         // the round's second exchange
};

}  // namespace horovodd::internal
