#include "worker_runtime/engine/engine_negotiation.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_transfer.h"

namespace horovodd::internal {
namespace {

// The fixed part every rank sends each round: two words, then one bit per
// cache slot (set: I have that slot's name pending with its descriptor).
struct RoundHeader {
  int64_t fusion_threshold = 0;
  // This rank's announcements: inline when they fit (see below), else the
  // whole of its part of the second exchange.
  int64_t announcement_bytes = 0;
};
constexpr size_t kHeaderBytes = sizeof(RoundHeader);

// Room for announcements after the bitset in the first exchange, so that a
// round with a few new names (the first calls after a reset, which emptied
// the cache) costs one exchange, not two. A few hundred bytes more per
// message cost nothing next to a round trip.
constexpr size_t kInlineAnnouncementBytes = 512;

bool Inline(int64_t announcement_bytes) {
  return announcement_bytes <= static_cast<int64_t>(kInlineAnnouncementBytes);
}

size_t BitsetBytes(size_t slots) { return (slots + 7) / 8; }

// Announcements: [u32 name size][name][u32 descriptor size][descriptor]...
void AppendField(std::string& out, const std::string& field) {
  const uint32_t size = static_cast<uint32_t>(field.size());
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out.append(field);
}

bool ReadField(const uint8_t* data, size_t bytes, size_t& at, std::string& field) {
  uint32_t size = 0;
  if (bytes - at < sizeof(size)) return false;
  std::memcpy(&size, data + at, sizeof(size));
  at += sizeof(size);
  if (bytes - at < size) return false;
  field.assign(reinterpret_cast<const char*>(data + at), size);
  at += size;
  return true;
}

using Announcement = std::pair<std::string, std::string>;  // name, descriptor

absl::StatusOr<std::vector<Announcement>> ParseAnnouncements(const uint8_t* data, size_t bytes,
                                                             int peer) {
  std::vector<Announcement> out;
  size_t at = 0;
  while (at < bytes) {
    Announcement a;
    if (!ReadField(data, bytes, at, a.first) || !ReadField(data, bytes, at, a.second)) {
      return absl::DataLossError(
          absl::StrCat("negotiation: rank ", peer, " sent announcements that do not parse"));
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string DescribeForMessage(const std::string& encoded) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  return d.ok() ? d->ToString() : std::string("an unreadable descriptor");
}

std::string ConflictMessage(const std::vector<const std::string*>& by_rank) {
  std::string message = "ranks enqueued it differently: ";
  // Name the first rank's request and the first that differs: enough to
  // find the bug. (Joined ranks may not have it: they are skipped.)
  size_t first = 0;
  while (by_rank[first] == nullptr) ++first;
  for (size_t r = first + 1; r < by_rank.size(); ++r) {
    if (by_rank[r] == nullptr || *by_rank[r] == *by_rank[first]) continue;
    absl::StrAppend(&message, "rank ", first, " has ", DescribeForMessage(*by_rank[first]),
                    ", rank ", r, " has ", DescribeForMessage(*by_rank[r]));
    break;
  }
  return message;
}

// Whether ranks that joined can take part in the request with zeros: a CPU
// allreduce (Horovod allows only allreduce while ranks have joined).
bool JoinedRanksMayStandIn(const std::string& encoded) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  return d.ok() && d->kind == RequestKind::kAllreduce;
}

std::string NotWithJoinedMessage(const std::string& encoded, const std::vector<int>& joined) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  const std::string operation = d.ok() ? d->operation : std::string("this collective");
  return absl::StrCat(operation, " cannot run while ranks [", absl::StrJoin(joined, ", "),
                      "] have joined (hvd.join): only allreduce takes part with joined ranks");
}

// What every rank sent this round, decoded.
struct RoundData {
  std::vector<RoundHeader> headers;            // by rank
  std::vector<const uint8_t*> bitsets;         // by rank
  std::vector<std::vector<Announcement>> announced;  // by rank
};

// Decides from the same data on every rank; updates `cache` last.
NegotiationResult Decide(const RoundData& data, ResponseCache& cache) {
  const size_t ranks = data.headers.size();
  // Name -> the descriptor each rank has it pending with (null: not pending).
  std::map<std::string, std::vector<const std::string*>> pending;
  for (size_t r = 0; r < ranks; ++r) {
    for (size_t slot = 0; slot < cache.size(); ++slot) {
      if ((data.bitsets[r][slot / 8] >> (slot % 8)) & 1) {
        auto& by_rank = pending[cache.slot(slot).name];
        by_rank.resize(ranks, nullptr);
        by_rank[r] = &cache.slot(slot).descriptor;
      }
    }
    for (const Announcement& a : data.announced[r]) {
      auto& by_rank = pending[a.first];
      by_rank.resize(ranks, nullptr);
      by_rank[r] = &a.second;
    }
  }
  NegotiationResult result;
  result.fusion_threshold = data.headers[0].fusion_threshold;
  // A rank with its join pending stands in for every request it lacks.
  std::vector<bool> joined(ranks, false);
  if (auto join = pending.find(kJoinRequestName); join != pending.end()) {
    for (size_t r = 0; r < ranks; ++r) {
      if (join->second[r] != nullptr) {
        joined[r] = true;
        result.joined.push_back(static_cast<int>(r));
      }
    }
  }
  std::vector<Announcement> to_cache;
  for (const auto& [name, by_rank] : pending) {
    const bool is_join = name == kJoinRequestName;
    bool everywhere = true, agree = true;
    const std::string* first = nullptr;
    int contributors = 0;
    std::vector<int> missing;
    for (size_t r = 0; r < ranks; ++r) {
      const std::string* d = by_rank[r];
      if (d == nullptr) {
        if (is_join || !joined[r]) {
          everywhere = false;
          missing.push_back(static_cast<int>(r));
        }
        continue;
      }
      ++contributors;
      if (first == nullptr) first = d;
      agree = agree && *d == *first;
    }
    if (!everywhere) {
      // A join waits for the others by design: no stall.
      if (!is_join) result.waiting.emplace(name, std::move(missing));
      continue;
    }
    if (!agree) {
      result.conflicts.push_back(Conflict{name, ConflictMessage(by_rank)});
      continue;
    }
    if (contributors < static_cast<int>(ranks) && !JoinedRanksMayStandIn(*first)) {
      result.conflicts.push_back(Conflict{name, NotWithJoinedMessage(*first, result.joined)});
      continue;
    }
    result.ready.push_back(name);
    if (!result.joined.empty()) {
      result.ready_descriptors.push_back(*first);
      result.ready_contributors.push_back(contributors);
    }
    to_cache.emplace_back(name, *first);
  }
  // After the loop: Record may move the strings `pending` points into.
  for (const Announcement& a : to_cache) cache.Record(a.first, a.second);
  return result;
}

}  // namespace

std::optional<size_t> ResponseCache::Find(const std::string& name,
                                          const std::string& descriptor) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end() || slots_[it->second].descriptor != descriptor) return std::nullopt;
  return it->second;
}

void ResponseCache::Record(const std::string& name, const std::string& descriptor) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    slots_[it->second].descriptor = descriptor;
    return;
  }
  if (slots_.size() >= kCapacity) Clear();
  by_name_.emplace(name, slots_.size());
  slots_.push_back(Entry{name, descriptor});
}

void ResponseCache::Clear() {
  slots_.clear();
  by_name_.clear();
}

namespace {

size_t RoundBytes(const ResponseCache& cache) {
  return kHeaderBytes + BitsetBytes(cache.size()) + kInlineAnnouncementBytes;
}

// A context's negotiation rounds: their own sequence series, and the
// receives of the next round, posted as soon as the previous one ended.
// Gloo sends a message only once the receiver has posted its receive (a
// send first announces itself and waits for the answer); a negotiation
// message announced while the peer is still busy with the previous
// collective would wait for that handshake, a wake-up of each side's loop
// thread on the way to every synchronous call. Posted ahead, the message
// goes at once and is read while the receiver is still busy.
//
// Every rank numbers its rounds alike and sizes them from its cache, which
// is identical on every rank; the round's parts are exchanged in `memory`
// (rank p's at p * round_bytes).
class NegotiationMailbox final : public GlooContext::Attachment {
 public:
  // The mailbox of `context`, made on first use.
  static NegotiationMailbox& Of(GlooContext& context) {
    std::unique_ptr<GlooContext::Attachment>& slot = context.attachment();
    if (auto* mailbox = dynamic_cast<NegotiationMailbox*>(slot.get())) return *mailbox;
    slot = std::make_unique<NegotiationMailbox>();
    return static_cast<NegotiationMailbox&>(*slot);
  }

  uint64_t round() const { return kOwnSequenceSeries + next_round_; }
  bool posted() const { return posted_; }
  size_t round_bytes() const { return round_bytes_; }
  uint8_t* part(int rank) { return memory_.data() + rank * round_bytes_; }
  gloo::transport::UnboundBuffer& buffer() { return buffer_->get(); }

  // Posts the next round's receives on `scope` (made with round()), each
  // peer's part `round_bytes` long.
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

  // The posted round's receives completed: the next round is not posted.
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
};

}  // namespace

struct NegotiationInFlight::State {
  State(GlooContext& context, NegotiationMailbox& mailbox, StallInspector* stall)
      : context(context),
        mailbox(mailbox),
        stall(stall),
        scope(context, "negotiation", mailbox.round()) {}
  GlooContext& context;
  NegotiationMailbox& mailbox;
  StallInspector* stall;
  CollectiveScope scope;
  std::string announcements;  // this rank's, sent in the second exchange
  CollectiveScope::PostedExchange posted;
};

NegotiationInFlight::NegotiationInFlight(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

NegotiationInFlight::~NegotiationInFlight() = default;

absl::StatusOr<std::unique_ptr<NegotiationInFlight>> NegotiationInFlight::Start(
    GlooContext& context, const std::vector<const Request*>& pending,
    int64_t fusion_threshold, const ResponseCache& cache, StallInspector* stall) {
  const int n = context.size;
  const int self = context.rank;
  const size_t bitset_bytes = BitsetBytes(cache.size());
  const size_t round_bytes = RoundBytes(cache);
  NegotiationMailbox& mailbox = NegotiationMailbox::Of(context);
  auto state = std::make_unique<State>(context, mailbox, stall);
  CollectiveScope& scope = state->scope;
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
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

  uint8_t* mine = mailbox.part(self);
  std::memset(mine, 0, round_bytes);
  for (const Request* request : pending) {
    if (std::optional<size_t> slot = cache.Find(request->name, request->descriptor)) {
      mine[kHeaderBytes + *slot / 8] |= static_cast<uint8_t>(1u << (*slot % 8));
    } else {
      AppendField(state->announcements, request->name);
      AppendField(state->announcements, request->descriptor);
    }
  }
  RoundHeader header{fusion_threshold, static_cast<int64_t>(state->announcements.size())};
  std::memcpy(mine, &header, kHeaderBytes);
  if (Inline(header.announcement_bytes)) {
    std::memcpy(mine + kHeaderBytes + bitset_bytes, state->announcements.data(),
                state->announcements.size());
  }
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
  const int n = scope.size();
  const int self = scope.rank();
  const size_t round_bytes = mailbox.round_bytes();
  // The exchange, one peer at a time, so the stall check knows who is late.
  for (int i = 0; i < state.posted.receives; ++i) {
    int source = -1;
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(*state.posted.recv, &source));
    if (state.stall != nullptr) state.stall->PeerArrived(source);
  }
  for (int i = 0; i < state.posted.sends; ++i) {
    HVDD_RETURN_IF_ERROR(scope.WaitSend(*state.posted.send));
  }
  mailbox.Consumed();

  RoundData data;
  data.headers.resize(n);
  data.bitsets.resize(n);
  data.announced.resize(n);
  // The second exchange carries the announcements of the ranks whose did not
  // fit inline; it runs only when there is one.
  std::vector<PeerRegion> blobs(n);
  size_t blob_total = 0;
  for (int p = 0; p < n; ++p) {
    const uint8_t* part = mailbox.part(p);
    std::memcpy(&data.headers[p], part, kHeaderBytes);
    data.bitsets[p] = part + kHeaderBytes;
    const int64_t bytes = data.headers[p].announcement_bytes;
    if (bytes < 0) {
      return absl::DataLossError(
          absl::StrCat("negotiation: rank ", p, " announced ", bytes, " bytes"));
    }
    if (Inline(bytes)) {
      HVDD_ASSIGN_OR_RETURN(data.announced[p],
                            ParseAnnouncements(part + round_bytes - kInlineAnnouncementBytes,
                                               static_cast<size_t>(bytes), p));
      continue;
    }
    blobs[p] = PeerRegion{blob_total, static_cast<size_t>(bytes)};
    blob_total += static_cast<size_t>(bytes);
  }
  if (blob_total > 0) {
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
    for (int p = 0; p < n; ++p) {
      if (Inline(data.headers[p].announcement_bytes)) continue;
      HVDD_ASSIGN_OR_RETURN(data.announced[p],
                            ParseAnnouncements(received.data + blobs[p].offset, blobs[p].bytes, p));
    }
  }
  NegotiationResult result = Decide(data, cache);
  // The next round's receives, sized from the cache as every rank now has it.
  CollectiveScope next(state.context, "negotiation", mailbox.round());
  HVDD_RETURN_IF_ERROR(mailbox.PostReceives(state.context, next, RoundBytes(cache)));
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
