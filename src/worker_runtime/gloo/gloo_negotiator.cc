#include "worker_runtime/gloo/gloo_negotiator.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"

namespace horovodd::internal {

absl::Status GlooNegotiator::Ended(absl::Status status) {
  if (!status.ok()) round_.reset();
  return status;
}

std::vector<int> GlooNegotiator::PeersOf(const GlooContext& context) {
  std::vector<int> peers;
  for (int p = 0; p < context.size; ++p) {
    if (p != context.rank) peers.push_back(p);
  }
  return peers;
}

absl::Status GlooNegotiator::PostReceives(CollectiveScope& scope, size_t part_bytes) {
  const int n = context_.size;
  if (buffer_ == nullptr || part_bytes != part_bytes_) {
    buffer_.reset();  // nothing is posted on it: the last round completed
    part_bytes_ = part_bytes;
    memory_.assign(n * part_bytes, 0);
    HVDD_ASSIGN_OR_RETURN(buffer_, context_.RegisterBuffer(memory_.data(), memory_.size()));
  }
  HVDD_RETURN_IF_ERROR(scope.Connect(peers_));
  for (int p = 0; p < n; ++p) {
    if (p == context_.rank) continue;
    HVDD_RETURN_IF_ERROR(
        scope.Recv(buffer_->get(), p, p * part_bytes, part_bytes, Channel::kMetadata));
  }
  posted_ = true;
  return absl::OkStatus();
}

absl::StatusOr<Negotiator::PartBuffer> GlooNegotiator::StartRound(size_t header_bytes) {
  round_.reset();
  round_.emplace(context_, "negotiation", sequence());
  HVDD_RETURN_IF_ERROR(Ended(round_->CheckHealth()));
  const size_t part_bytes = header_bytes + kRoomBytes;
  if (!posted_) {
    HVDD_RETURN_IF_ERROR(Ended(PostReceives(*round_, part_bytes)));
  } else if (part_bytes_ == part_bytes) {
    // Posted as the last round ended: this round's waits name whose part
    // they wait for all the same (the daemon's stall detector reads it).
    round_->AdoptReceives(buffer_->get(), peers_);
  } else {
    // Peers size their parts from their caches too: ours no longer matches
    // what the last round left, so theirs may not either.
    round_.reset();
    return absl::FailedPreconditionError(
        absl::StrCat("negotiation: this round needs ", part_bytes,
                     " bytes per rank but the last round on ", "this ring posted ", part_bytes_,
                     " (every round on one ring must use the same ResponseCache)"));
  }
  uint8_t* mine = part(context_.rank);
  std::memset(mine, 0, part_bytes);
  return PartBuffer{mine, kRoomBytes};
}

absl::Status GlooNegotiator::Post(size_t /*bytes*/) {
  HVDD_CHECK(round_.has_value()) << "no negotiation round started";
  // Every part goes whole: the peers posted receives of that size.
  const int n = context_.size;
  const int self = context_.rank;
  posted_parts_ = CollectiveScope::PostedExchange{&buffer_->get(), &buffer_->get(), 0, n - 1};
  for (int p = 0; p < n; ++p) {
    if (p == self) continue;
    HVDD_RETURN_IF_ERROR(Ended(
        round_->Send(buffer_->get(), p, self * part_bytes_, part_bytes_, Channel::kMetadata)));
    ++posted_parts_.sends;
  }
  return absl::OkStatus();
}

absl::Status GlooNegotiator::Collect(absl::FunctionRef<void(int rank)> arrived) {
  HVDD_CHECK(round_.has_value()) << "no negotiation round started";
  // One peer at a time, so the stall check knows who is late.
  for (int i = 0; i < posted_parts_.receives; ++i) {
    int source = -1;
    HVDD_RETURN_IF_ERROR(Ended(round_->WaitRecv(*posted_parts_.recv, &source)));
    arrived(source);
  }
  for (int i = 0; i < posted_parts_.sends; ++i) {
    HVDD_RETURN_IF_ERROR(Ended(round_->WaitSend(*posted_parts_.send)));
  }
  posted_ = false;
  ++next_round_;
  return absl::OkStatus();
}

absl::Span<const uint8_t> GlooNegotiator::Part(int r) const {
  return absl::Span<const uint8_t>(memory_.data() + r * part_bytes_, part_bytes_);
}

absl::StatusOr<const uint8_t*> GlooNegotiator::ExchangeLater(absl::Span<const size_t> bytes_by_rank,
                                                             absl::string_view mine) {
  HVDD_CHECK(round_.has_value()) << "no negotiation round started";
  const int n = context_.size;
  const int self = context_.rank;
  std::vector<PeerRegion> blobs(n);
  size_t total = 0;
  for (int p = 0; p < n; ++p) {
    blobs[p] = PeerRegion{total, bytes_by_rank[p]};
    total += bytes_by_rank[p];
  }
  HVDD_CHECK_EQ(mine.size(), bytes_by_rank[self]);
  absl::StatusOr<CollectiveScope::Scratch> received = round_->RegisterScratch(total);
  if (!received.ok()) return Ended(received.status());
  if (!mine.empty()) std::memcpy(received->data + blobs[self].offset, mine.data(), mine.size());
  if (n > 1) {
    const std::vector<PeerRegion> to(n, blobs[self]);
    HVDD_RETURN_IF_ERROR(Ended(
        round_->ExchangeWithAll(received->buffer, to, received->buffer, blobs, Channel::kData)));
  }
  return received->data;
}

absl::Status GlooNegotiator::EndRound(size_t next_header_bytes) {
  round_.reset();
  // The next round's receives, sized as every rank's next part will be.
  CollectiveScope next(context_, "negotiation", sequence());
  return PostReceives(next, next_header_bytes + kRoomBytes);
}

}  // namespace horovodd::internal
