#include "worker_runtime/gloo/gloo_transfer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace horovodd::internal {

CollectiveScope::CollectiveScope(GlooContext& context, std::string label)
    : context_(context),
      label_(std::move(label)),
      sequence_(context.NextCollectiveSequence()),
      deadline_(absl::Now() + context.collective_timeout()) {}

CollectiveScope::CollectiveScope(GlooContext& context, std::string label, uint64_t own_sequence)
    : context_(context),
      label_(std::move(label)),
      sequence_(own_sequence),
      deadline_(absl::Now() + context.collective_timeout()) {}

CollectiveScope::~CollectiveScope() {
  if (!failure_.ok()) {
    // A failed context is never used again: its scratch goes with the scope.
    context_.MarkFailed(failure_);
    return;
  }
  // Unregistered first: Gloo must be done with the memory before another
  // collective gets it. A context that failed meanwhile (another scope's
  // failure, an abort) is never used again: nothing to keep it for.
  buffers_.clear();
  if (!context_.health().ok()) return;
  for (ScratchPool::Block& block : scratch_) context_.scratch_pool().Give(std::move(block));
}

absl::Status LabeledHealth(const GlooContext& context, const std::string& label) {
  absl::Status health = context.health();
  if (health.ok()) return health;
  const char* verb = health.code() == absl::StatusCode::kAborted ? " aborted: " : " failed: ";
  return absl::Status(health.code(), absl::StrCat(label, verb, health.message()));
}

absl::Status CollectiveScope::CheckHealth() const { return LabeledHealth(context_, label_); }

absl::StatusOr<gloo::transport::UnboundBuffer*> CollectiveScope::Register(void* data,
                                                                          size_t bytes) {
  if (!failure_.ok()) return failure_;
  absl::StatusOr<std::unique_ptr<RegisteredBuffer>> buffer = context_.RegisterBuffer(data, bytes);
  // Fails only when another thread aborted the context meanwhile.
  if (!buffer.ok()) return Fail(AbortedStatus());
  buffers_.push_back(*std::move(buffer));
  return &buffers_.back()->get();
}

absl::StatusOr<CollectiveScope::Scratch> CollectiveScope::RegisterScratch(size_t bytes) {
  scratch_.push_back(context_.scratch_pool().Take(bytes));
  uint8_t* data = scratch_.back().data.get();
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer, Register(data, bytes));
  return Scratch{data, buffer};
}

uint64_t CollectiveScope::SlotFor(Channel channel) const {
  return (sequence_ << 8) | static_cast<uint64_t>(channel);
}

std::chrono::milliseconds CollectiveScope::RemainingTime() const {
  // Gloo treats a zero wait as "time out now"; never pass less than 1ms.
  return std::max(std::chrono::milliseconds(1),
                  absl::ToChronoMilliseconds(deadline_ - absl::Now()));
}

absl::Status CollectiveScope::Fail(absl::Status status) {
  if (failure_.ok()) failure_ = std::move(status);
  return failure_;
}

absl::Status CollectiveScope::AbortedStatus() const {
  return absl::AbortedError(absl::StrCat(label_, " aborted: ", context_.health().message()));
}

absl::Status CollectiveScope::FromException(const std::exception& e) {
  // Once aborted, whatever Gloo throws (a closed socket, a failed epoll_ctl
  // on it) is a consequence of the abort.
  if (context_.aborted()) return Fail(AbortedStatus());
  if (IsGlooTimeoutMessage(e.what())) {
    return Fail(absl::DeadlineExceededError(
        absl::StrCat(label_, " failed: ", e.what(), " (collective timeout ",
                     absl::FormatDuration(context_.collective_timeout()), ")")));
  }
  return Fail(absl::UnavailableError(absl::StrCat(label_, " failed: ", e.what())));
}

absl::Status CollectiveScope::Connect(const std::vector<int>& peers) {
  if (!failure_.ok()) return failure_;
  return Connected(context_.ConnectPeers(peers));
}

absl::Status CollectiveScope::ConnectAtOnce(const std::vector<int>& peers,
                                            const std::string& batch) {
  if (!failure_.ok()) return failure_;
  return Connected(context_.ConnectPeersAtOnce(peers, batch));
}

absl::Status CollectiveScope::Connected(absl::Status connected) {
  if (connected.ok()) return connected;
  if (connected.code() == absl::StatusCode::kAborted) return Fail(AbortedStatus());
  return Fail(
      absl::Status(connected.code(), absl::StrCat(label_, " failed: ", connected.message())));
}

absl::Status CollectiveScope::Send(gloo::transport::UnboundBuffer& buffer, int peer, size_t offset,
                                   size_t bytes, Channel channel) {
  if (!failure_.ok()) return failure_;
  if (!context_.connected(peer)) HVDD_RETURN_IF_ERROR(Connect({peer}));
  try {
    buffer.send(peer, SlotFor(channel), offset, bytes);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

absl::Status CollectiveScope::Recv(gloo::transport::UnboundBuffer& buffer, int peer, size_t offset,
                                   size_t bytes, Channel channel) {
  if (!failure_.ok()) return failure_;
  if (!context_.connected(peer)) HVDD_RETURN_IF_ERROR(Connect({peer}));
  try {
    buffer.recv(peer, SlotFor(channel), offset, bytes);
    if (context_.peer_wait() != nullptr) posted_receives_.emplace_back(&buffer, peer);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

absl::Status CollectiveScope::WaitSend(gloo::transport::UnboundBuffer& buffer) {
  if (!failure_.ok()) return failure_;
  try {
    // false: GlooContext::Abort() woke us.
    if (buffer.waitSend(nullptr, RemainingTime())) return absl::OkStatus();
    return Fail(AbortedStatus());
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

absl::Status CollectiveScope::WaitRecv(gloo::transport::UnboundBuffer& buffer, int* source) {
  if (!failure_.ok()) return failure_;
  PeerWait* const peer_wait = context_.peer_wait();
  if (peer_wait == nullptr) return WaitRecvFrom(buffer, source);
  auto posted = std::find_if(posted_receives_.begin(), posted_receives_.end(),
                             [&buffer](const auto& r) { return r.first == &buffer; });
  int from = -1;
  absl::Status status;
  {
    ScopedPeerWait waiting(peer_wait, posted == posted_receives_.end() ? -1 : posted->second);
    status = WaitRecvFrom(buffer, &from);
  }
  if (source != nullptr) *source = from;
  if (status.ok()) {
    auto done = std::find(
        posted_receives_.begin(), posted_receives_.end(),
        std::make_pair(static_cast<const gloo::transport::UnboundBuffer*>(&buffer), from));
    if (done != posted_receives_.end()) posted_receives_.erase(done);
  }
  return status;
}

void CollectiveScope::AdoptReceives(const gloo::transport::UnboundBuffer& buffer,
                                    absl::Span<const int> peers) {
  if (context_.peer_wait() == nullptr) return;
  for (int peer : peers) posted_receives_.emplace_back(&buffer, peer);
}

absl::Status CollectiveScope::WaitRecvFrom(gloo::transport::UnboundBuffer& buffer, int* source) {
  try {
    if (buffer.waitRecv(source, RemainingTime())) return absl::OkStatus();
    return Fail(AbortedStatus());
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

absl::Status CollectiveScope::ExchangeWithAll(gloo::transport::UnboundBuffer* send,
                                              const std::vector<PeerRegion>& to,
                                              gloo::transport::UnboundBuffer* recv,
                                              const std::vector<PeerRegion>& from,
                                              Channel channel) {
  HVDD_ASSIGN_OR_RETURN(PostedExchange posted, PostExchange(send, to, recv, from, channel));
  return WaitExchange(posted);
}

absl::StatusOr<CollectiveScope::PostedExchange> CollectiveScope::PostExchange(
    gloo::transport::UnboundBuffer* send, const std::vector<PeerRegion>& to,
    gloo::transport::UnboundBuffer* recv, const std::vector<PeerRegion>& from, Channel channel) {
  PostedExchange posted{send, recv, 0, 0};
  std::vector<int> peers;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank() && (from[peer].bytes > 0 || to[peer].bytes > 0)) peers.push_back(peer);
  }
  HVDD_RETURN_IF_ERROR(Connect(peers));
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank() || from[peer].bytes == 0) continue;
    HVDD_RETURN_IF_ERROR(Recv(*recv, peer, from[peer].offset, from[peer].bytes, channel));
    ++posted.receives;
  }
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank() || to[peer].bytes == 0) continue;
    HVDD_RETURN_IF_ERROR(Send(*send, peer, to[peer].offset, to[peer].bytes, channel));
    ++posted.sends;
  }
  return posted;
}

absl::Status CollectiveScope::WaitExchange(const PostedExchange& posted) {
  for (int i = 0; i < posted.receives; ++i) HVDD_RETURN_IF_ERROR(WaitRecv(*posted.recv));
  for (int i = 0; i < posted.sends; ++i) HVDD_RETURN_IF_ERROR(WaitSend(*posted.send));
  return absl::OkStatus();
}

}  // namespace horovodd::internal
