#include "worker_runtime/engine/engine_negotiation.h"

#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_local.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_negotiation.h"

namespace horovodd::internal {
namespace {

// Room for announcements in a part over the ring, so that a round with a
// few new names (the first calls after a reset, which emptied the cache)
// costs one exchange, not two. A few hundred bytes more per message cost
// nothing next to a round trip.
constexpr size_t kRingAnnouncementBytes = 512;

size_t RingRoundBytes(const ResponseCache& cache) {
  return AnnouncementsOffset(cache) + kRingAnnouncementBytes;
}

// A context's negotiation rounds. Over the host's segment: its channel.
// Over the ring: their own sequence series, and the receives of the next
// round, posted as soon as the previous one ended. Gloo sends a message only
// once the receiver has posted its receive (a send first announces itself
// and waits for the answer); a negotiation message announced while the peer
// is still busy with the previous collective would wait for that handshake,
// a wake-up of each side's loop thread on the way to every synchronous call.
// Posted ahead, the message goes at once and is read while the receiver is
// still busy.
//
// Every rank numbers its rounds alike and sizes them from its cache, which
// is identical on every rank; over the ring the round's parts are exchanged
// in `memory` (rank p's at p * round_bytes).
class NegotiationMailbox final : public GlooContext::Attachment {
 public:
  // The mailbox of `context`, made on first use (after ConnectLocalGroup,
  // which decided the context's way once and for all).
  static NegotiationMailbox& Of(GlooContext& context) {
    std::unique_ptr<GlooContext::Attachment>& slot = context.attachment();
    if (auto* mailbox = dynamic_cast<NegotiationMailbox*>(slot.get())) return *mailbox;
    slot = std::make_unique<NegotiationMailbox>(context);
    return static_cast<NegotiationMailbox&>(*slot);
  }

  explicit NegotiationMailbox(GlooContext& context) : local_(context.local_group()) {
    if (shm::ShmGroup* group = AllLocalGroup(context)) {
      // All local: the group's index is the ring rank (gloo_local.cc).
      HVDD_CHECK_EQ(group->rank(), context.rank);
      channel_ = std::make_unique<shm::NegotiationChannel>(*group);
    }
  }

  // The host's channel when every rank is on this host, else null.
  shm::NegotiationChannel* channel() { return channel_.get(); }

  uint64_t round() const { return kOwnSequenceSeries + next_round_; }
  bool posted() const { return posted_; }
  size_t round_bytes() const { return round_bytes_; }
  uint8_t* part(int rank) { return memory_.data() + rank * round_bytes_; }
  gloo::transport::UnboundBuffer& buffer() { return buffer_->get(); }

  // Over the ring: posts the next round's receives on `scope` (made with
  // round()), each peer's part `round_bytes` long.
  absl::Status PostReceives(GlooContext& context, CollectiveScope& scope, size_t round_bytes) {
    const int n = context.size;
    if (buffer_ == nullptr || round_bytes != round_bytes_) {
      buffer_.reset();  // nothing is posted on it: the last round completed
      round_bytes_ = round_bytes;
      memory_.assign(n * round_bytes, 0);
      HVDD_ASSIGN_OR_RETURN(buffer_, context.RegisterBuffer(memory_.data(), memory_.size()));
    }
    for (int p = 0; p < n; ++p) {
      if (p == context.rank) continue;
      HVDD_RETURN_IF_ERROR(
          scope.Recv(buffer_->get(), p, p * round_bytes, round_bytes, Channel::kMetadata));
    }
    posted_ = true;
    return absl::OkStatus();
  }

  // The round's parts are in: the next round is not posted.
  void Consumed() {
    posted_ = false;
    ++next_round_;
  }

 private:
  uint64_t next_round_ = 0;
  bool posted_ = false;
  size_t round_bytes_ = 0;
  std::vector<uint8_t> memory_;
  std::unique_ptr<RegisteredBuffer> buffer_;  // over memory_; declared after it
  std::shared_ptr<LocalGroup> local_;  // keeps the channel's group mapped
  std::unique_ptr<shm::NegotiationChannel> channel_;  // declared after local_
};

}  // namespace

struct NegotiationInFlight::State {
  State(GlooContext& context, NegotiationMailbox& mailbox, StallInspector* stall)
      : context(context),
        mailbox(mailbox),
        stall(stall),
        scope(context, "negotiation", mailbox.round()),
        deadline(CollectiveDeadline(context)) {}
  GlooContext& context;
  NegotiationMailbox& mailbox;
  StallInspector* stall;
  CollectiveScope scope;
  absl::Time deadline;  // the shared-memory waits'
  // Announcements that fit in a part: at most this many bytes (the same on
  // every rank: all take the same way and have the same cache).
  size_t room = 0;
  std::string announcements;  // this rank's, sent in the second exchange
  CollectiveScope::PostedExchange posted;  // over the ring
};

NegotiationInFlight::NegotiationInFlight(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

NegotiationInFlight::~NegotiationInFlight() = default;

absl::StatusOr<std::unique_ptr<NegotiationInFlight>> NegotiationInFlight::Start(
    GlooContext& context, const std::vector<const Request*>& pending,
    int64_t fusion_threshold, const ResponseCache& cache, StallInspector* stall) {
  NegotiationMailbox& mailbox = NegotiationMailbox::Of(context);
  auto state = std::make_unique<State>(context, mailbox, stall);
  CollectiveScope& scope = state->scope;
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  if (shm::NegotiationChannel* channel = mailbox.channel()) {
    state->room = shm::NegotiationChannel::kPartBytes - AnnouncementsOffset(cache);
    const size_t bytes = EncodePart(pending, fusion_threshold, cache, state->room,
                                    channel->NextPart(), state->announcements);
    channel->Publish(bytes);
    return std::unique_ptr<NegotiationInFlight>(new NegotiationInFlight(std::move(state)));
  }

  const int n = context.size;
  const int self = context.rank;
  const size_t round_bytes = RingRoundBytes(cache);
  if (!mailbox.posted()) {
    HVDD_RETURN_IF_ERROR(mailbox.PostReceives(context, scope, round_bytes));
  } else if (mailbox.round_bytes() != round_bytes) {
    // Peers size their messages from their caches too: ours no longer
    // matches what the last round left, so theirs may not either.
    return absl::FailedPreconditionError(absl::StrCat(
        "negotiation: this round needs ", round_bytes, " bytes per rank but the last round on ",
        "this ring posted ", mailbox.round_bytes(),
        " (every round on one ring must use the same ResponseCache)"));
  }
  state->room = kRingAnnouncementBytes;
  uint8_t* mine = mailbox.part(self);
  std::memset(mine, 0, round_bytes);
  EncodePart(pending, fusion_threshold, cache, state->room, mine, state->announcements);
  state->posted = CollectiveScope::PostedExchange{&mailbox.buffer(), &mailbox.buffer(), 0, n - 1};
  for (int p = 0; p < n; ++p) {
    if (p == self) continue;
    HVDD_RETURN_IF_ERROR(
        scope.Send(mailbox.buffer(), p, self * round_bytes, round_bytes, Channel::kMetadata));
    ++state->posted.sends;
  }
  return std::unique_ptr<NegotiationInFlight>(new NegotiationInFlight(std::move(state)));
}

absl::StatusOr<NegotiationResult> NegotiationInFlight::Finish(ResponseCache& cache) {
  State& state = *state_;
  CollectiveScope& scope = state.scope;
  NegotiationMailbox& mailbox = state.mailbox;
  shm::NegotiationChannel* channel = mailbox.channel();
  const int n = scope.size();
  const int self = scope.rank();
  RoundData data;
  data.headers.resize(n);
  data.bitsets.resize(n);
  data.announced.resize(n);
  // The exchange, one peer at a time, so the stall check knows who is late.
  auto arrived = [&state](int peer) {
    if (state.stall != nullptr) state.stall->PeerArrived(peer);
  };
  if (channel != nullptr) {
    HVDD_RETURN_IF_ERROR(AfterLocal(state.context, channel->Collect(state.deadline, arrived)));
    mailbox.Consumed();  // the round's number, for a second exchange's sequence
    for (int p = 0; p < n; ++p) {
      HVDD_RETURN_IF_ERROR(DecodePart(channel->Part(p), p, cache, state.room, data));
    }
  } else {
    for (int i = 0; i < state.posted.receives; ++i) {
      int source = -1;
      HVDD_RETURN_IF_ERROR(scope.WaitRecv(*state.posted.recv, &source));
      arrived(source);
    }
    for (int i = 0; i < state.posted.sends; ++i) {
      HVDD_RETURN_IF_ERROR(scope.WaitSend(*state.posted.send));
    }
    mailbox.Consumed();
    for (int p = 0; p < n; ++p) {
      const absl::Span<const uint8_t> part(mailbox.part(p), mailbox.round_bytes());
      HVDD_RETURN_IF_ERROR(DecodePart(part, p, cache, state.room, data));
    }
  }

  // The second exchange carries the announcements of the ranks whose did not
  // fit; it runs only when there is one, over the ring either way.
  if (!data.announced_later.empty()) {
    std::vector<PeerRegion> blobs(n);
    size_t blob_total = 0;
    for (int p : data.announced_later) {
      blobs[p] = PeerRegion{blob_total, static_cast<size_t>(data.headers[p].announcement_bytes)};
      blob_total += blobs[p].bytes;
    }
    HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch received, scope.RegisterScratch(blob_total));
    if (blobs[self].bytes > 0) {
      std::memcpy(received.data + blobs[self].offset, state.announcements.data(),
                  state.announcements.size());
    }
    if (n > 1) {
      std::vector<PeerRegion> to(n, blobs[self]);
      HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(received.buffer, to, received.buffer, blobs,
                                                 Channel::kData));
    }
    for (int p : data.announced_later) {
      HVDD_ASSIGN_OR_RETURN(data.announced[p],
                            ParseAnnouncements(received.data + blobs[p].offset, blobs[p].bytes, p));
    }
  }
  NegotiationResult result = Decide(data, cache);
  if (channel == nullptr) {
    // The next round's receives, sized from the cache as every rank now has it.
    CollectiveScope next(state.context, "negotiation", mailbox.round());
    HVDD_RETURN_IF_ERROR(mailbox.PostReceives(state.context, next, RingRoundBytes(cache)));
  }
  return result;
}

absl::StatusOr<NegotiationResult> Negotiate(GlooContext& context,
                                            const std::vector<const Request*>& pending,
                                            int64_t fusion_threshold, ResponseCache& cache,
                                            StallInspector* stall) {
  HVDD_ASSIGN_OR_RETURN(
      const std::unique_ptr<NegotiationInFlight> round,
      NegotiationInFlight::Start(context, pending, fusion_threshold, cache, stall));
  return round->Finish(cache);
}

}  // namespace horovodd::internal
