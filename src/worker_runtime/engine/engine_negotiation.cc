#include "worker_runtime/engine/engine_negotiation.h"

#include <optional>
#include <string>
#include <utility>

#include "common/status_macros.h"
#include "worker_runtime/engine/engine_round_result.h"

namespace horovodd::internal {

struct NegotiationInFlight::State {
  State(Negotiator& negotiator, StallInspector* stall) : negotiator(negotiator), stall(stall) {}
  Negotiator& negotiator;
  StallInspector* stall;
  // Announcements that fit in a part: at most this many bytes (the same on
  // every rank: all take the same way and have the same cache).
  size_t room = 0;
  std::string announcements;  // this rank's, sent in the second exchange
  bool ended = false;         // Finish ended the round
};

NegotiationInFlight::NegotiationInFlight(std::unique_ptr<State> state) : state_(std::move(state)) {}

NegotiationInFlight::~NegotiationInFlight() {
  if (!state_->ended) state_->negotiator.AbandonRound();
}

absl::StatusOr<std::unique_ptr<NegotiationInFlight>> NegotiationInFlight::Start(
    Negotiator& negotiator, const std::vector<const Request*>& pending, int64_t fusion_threshold,
    const ResponseCache& cache, StallInspector* stall) {
  auto state = std::make_unique<State>(negotiator, stall);
  absl::StatusOr<Negotiator::PartBuffer> part = negotiator.StartRound(AnnouncementsOffset(cache));
  if (!part.ok()) {
    negotiator.AbandonRound();
    return part.status();
  }
  std::unique_ptr<NegotiationInFlight> round(new NegotiationInFlight(std::move(state)));
  State& s = *round->state_;
  s.room = part->room;
  const size_t bytes =
      EncodePart(pending, fusion_threshold, cache, s.room, part->data, s.announcements);
  HVDD_RETURN_IF_ERROR(negotiator.Post(bytes));
  return round;
}

absl::StatusOr<NegotiationResult> NegotiationInFlight::Finish(ResponseCache& cache) {
  State& state = *state_;
  Negotiator& negotiator = state.negotiator;
  const int n = negotiator.size();
  const int self = negotiator.rank();
  const int decider = negotiator.decider();
  const auto arrived = [&state](int peer) {
    if (state.stall != nullptr) state.stall->PeerArrived(peer);
  };
  const auto end = [&](NegotiationResult result) -> absl::StatusOr<NegotiationResult> {
    state.ended = true;
    // Sized from the cache as every rank now has it.
    HVDD_RETURN_IF_ERROR(negotiator.EndRound(AnnouncementsOffset(cache)));
    return result;
  };
  if (decider != Negotiator::kEveryRank && self != decider) {
    HVDD_ASSIGN_OR_RETURN(const std::optional<absl::Span<const uint8_t>> decided,
                          negotiator.AwaitResult(arrived));
    if (decided.has_value()) {
      HVDD_ASSIGN_OR_RETURN(NegotiationResult result, ApplyRoundResult(*decided, cache));
      return end(std::move(result));
    }
    // The decider said to decide from the parts, as below.
  }
  // This rank decides: as every rank does, or for all of them.
  const bool for_all = self == decider;
  bool posted = false;  // for_all: the others have the decider's word
  RoundData data;
  data.headers.resize(n);
  data.bitsets.resize(n);
  data.announced.resize(n);
  HVDD_RETURN_IF_ERROR(negotiator.Collect(arrived));
  absl::Status decoded = absl::OkStatus();
  for (int p = 0; p < n && decoded.ok(); ++p) {
    decoded = DecodePart(negotiator.Part(p), p, cache, state.room, data);
  }
  if (for_all && (!decoded.ok() || !data.announced_later.empty())) {
    // The others read the parts too: they meet the same bad part, or take
    // their share of the second exchange.
    HVDD_RETURN_IF_ERROR(negotiator.PostResult(std::nullopt));
    posted = true;
  }
  HVDD_RETURN_IF_ERROR(decoded);

  // The second exchange carries the announcements of the ranks whose did not
  // fit; it runs only when there is one.
  if (!data.announced_later.empty()) {
    std::vector<size_t> bytes(n, 0);
    for (int p : data.announced_later) {
      bytes[p] = static_cast<size_t>(data.headers[p].announcement_bytes);
    }
    const absl::string_view mine =
        bytes[self] > 0 ? absl::string_view(state.announcements) : absl::string_view();
    HVDD_ASSIGN_OR_RETURN(const uint8_t* received, negotiator.ExchangeLater(bytes, mine));
    size_t offset = 0;
    for (int p = 0; p < n; ++p) {
      if (bytes[p] > 0) {
        HVDD_ASSIGN_OR_RETURN(data.announced[p],
                              ParseAnnouncements(received + offset, bytes[p], p));
      }
      offset += bytes[p];
    }
  }
  std::vector<Announcement> cached;
  NegotiationResult result = Decide(data, cache, for_all ? &cached : nullptr);
  if (for_all && !posted) {
    // A result past the room: the others decide from the parts.
    HVDD_RETURN_IF_ERROR(
        negotiator.PostResult(EncodeRoundResult(result, cached, negotiator.ResultBuffer())));
  }
  return end(std::move(result));
}

absl::StatusOr<NegotiationResult> Negotiate(Negotiator& negotiator,
                                            const std::vector<const Request*>& pending,
                                            int64_t fusion_threshold, ResponseCache& cache,
                                            StallInspector* stall) {
  HVDD_ASSIGN_OR_RETURN(
      const std::unique_ptr<NegotiationInFlight> round,
      NegotiationInFlight::Start(negotiator, pending, fusion_threshold, cache, stall));
  return round->Finish(cache);
}

}  // namespace horovodd::internal
