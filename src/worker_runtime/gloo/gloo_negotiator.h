// The engine's negotiation rounds over the TCP ring (comm/negotiator.h).
//
// Rounds number their own sequence series (kOwnSequenceSeries + round,
// gloo_transfer.h), and the receives of the next round are posted as soon
// as the previous one ended. Gloo sends a message only once the receiver
// has posted its receive (a send first announces itself and waits for the
// answer); a negotiation message announced while the peer is still busy
// with the previous collective would wait for that handshake, a wake-up of
// each side's loop thread on the way to every synchronous call. Posted
// ahead, the message goes at once and is read while the receiver is still
// busy.
//
// Every rank's part of a round has the same size, header_bytes plus a room
// of kRoomBytes for announcements (a few hundred bytes more per message cost
// nothing next to a round trip, and a round with a few new names, as after
// a reset, then needs no second exchange). The parts are exchanged in one
// buffer (rank p's at p * part bytes); the second exchange runs in the
// round's scope, on the data channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "worker_runtime/comm/negotiator.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_transfer.h"

namespace horovodd::internal {

class GlooNegotiator final : public Negotiator {
 public:
  static constexpr size_t kRoomBytes = 512;

  // `context` must outlive the negotiator.
  explicit GlooNegotiator(GlooContext& context) : context_(context), peers_(PeersOf(context)) {}
  GlooNegotiator(const GlooNegotiator&) = delete;
  GlooNegotiator& operator=(const GlooNegotiator&) = delete;

  int rank() const override { return context_.rank; }
  int size() const override { return context_.size; }
  absl::StatusOr<PartBuffer> StartRound(size_t header_bytes) override;
  absl::Status Post(size_t bytes) override;
  absl::Status Collect(absl::FunctionRef<void(int rank)> arrived) override;
  absl::Span<const uint8_t> Part(int r) const override;
  absl::StatusOr<const uint8_t*> ExchangeLater(absl::Span<const size_t> bytes_by_rank,
                                               absl::string_view mine) override;
  absl::Status EndRound(size_t next_header_bytes) override;
  void AbandonRound() override { round_.reset(); }

 private:
  uint64_t sequence() const { return kOwnSequenceSeries + next_round_; }
  uint8_t* part(int r) { return memory_.data() + r * part_bytes_; }
  // Every rank of `context` but its own, in rank order.
  static std::vector<int> PeersOf(const GlooContext& context);
  // Posts the next round's receives on `scope`, each peer's part
  // `part_bytes` long.
  absl::Status PostReceives(CollectiveScope& scope, size_t part_bytes);
  // A failure ends the round: its scope marks the context failed as it goes.
  absl::Status Ended(absl::Status status);

  GlooContext& context_;
  const std::vector<int> peers_;  // PeersOf(context_): every round talks to them all
  uint64_t next_round_ = 0;
  bool posted_ = false;  // the next round's receives are posted
  size_t part_bytes_ = 0;
  std::vector<uint8_t> memory_;
  std::unique_ptr<RegisteredBuffer> buffer_;  // over memory_; declared after it
  // The round in progress, from StartRound to its end.
  std::optional<CollectiveScope> round_;
  CollectiveScope::PostedExchange posted_parts_;
};

}  // namespace horovodd::internal
