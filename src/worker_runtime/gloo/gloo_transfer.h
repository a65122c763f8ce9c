// One collective's use of a GlooContext: the slot it posts on, its deadline,
// the buffers it registers, and the translation of Gloo's exceptions into
// Status. Algorithms (gloo_ring.h, gloo_ops.cc) are written against this
// class only and never see an exception.
//
// After the first failed transfer every method returns that failure without
// touching Gloo, and the destructor marks the context failed (which starts
// closing its pairs). Gloo never writes into a caller's tensor once the
// collective has returned: the destructor destroys the registered buffers,
// and a Gloo buffer's destruction waits for a transfer into it in flight and
// makes the loop drop later ones.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/sigpipe_block.h"

namespace horovodd::internal {

// Sub-streams of one collective (e.g. its size exchange and its data, or
// the parts it reduces and the results it shares), so each matches only
// its own kind of message.
enum class Channel : uint8_t { kMetadata = 1, kData = 2, kResult = 3 };

// Bytes [offset, offset + bytes) of a buffer, exchanged with one peer.
struct PeerRegion {
  size_t offset = 0;
  size_t bytes = 0;
};

// Sequence numbers from here up are never drawn from a context: the
// engine's negotiation rounds number theirs as kOwnSequenceSeries + round.
constexpr uint64_t kOwnSequenceSeries = uint64_t{1} << 55;

// OK when `context` is usable; else why not, naming `label` ("allreduce
// 'grads' aborted: ...").
absl::Status LabeledHealth(const GlooContext& context, const std::string& label);

class CollectiveScope {
 public:
  // Draws the collective's sequence number from `context`. `label` names the
  // collective in every error, e.g. "allreduce 'grads'".
  CollectiveScope(GlooContext& context, std::string label);
  // With a sequence number of the caller's own series (see
  // kOwnSequenceSeries), for exchanges whose receives are posted before the
  // exchange starts: one series per kind of exchange, numbered alike on
  // every rank.
  CollectiveScope(GlooContext& context, std::string label, uint64_t own_sequence);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

  int rank() const { return context_.rank; }
  int size() const { return context_.size; }
  // The same on every rank for the same collective.
  uint64_t sequence() const { return sequence_; }

  // OK when the context is usable; else why not, naming the collective.
  absl::Status CheckHealth() const;

  // Registers [data, data + bytes) for this collective's transfers; the
  // buffer lives until the scope ends, so `data` must outlive the scope.
  absl::StatusOr<gloo::transport::UnboundBuffer*> Register(void* data, size_t bytes);

  // Memory owned by the scope (from the context's ScratchPool, contents
  // unspecified), registered for transfers.
  struct Scratch {
    uint8_t* data = nullptr;
    gloo::transport::UnboundBuffer* buffer = nullptr;
  };
  absl::StatusOr<Scratch> RegisterScratch(size_t bytes);

  // Connects the pairs to `peers` that are not connected yet, all at once
  // (GlooContext::ConnectPeers). A collective that talks to several peers
  // calls it with all of them before it posts anything: each of them does
  // the same in this collective, so no rank waits for a peer that is itself
  // waiting to connect to a third. Send and Recv connect their one peer
  // themselves, which is enough where every rank talks to its peers in the
  // same order (a tree, the ring, pairs by rank or by XOR).
  absl::Status Connect(const std::vector<int>& peers);
  // The same with one rendezvous key for all of them
  // (GlooContext::ConnectPeersAtOnce).
  absl::Status ConnectAtOnce(const std::vector<int>& peers, const std::string& batch);

  // Post a transfer of `bytes` at `offset` in `buffer`. Pairs match in
  // posting order per peer and channel.
  absl::Status Send(gloo::transport::UnboundBuffer& buffer, int peer, size_t offset, size_t bytes,
                    Channel channel);
  absl::Status Recv(gloo::transport::UnboundBuffer& buffer, int peer, size_t offset, size_t bytes,
                    Channel channel);
  // Wait for one posted send / receive of `buffer` to complete.
  absl::Status WaitSend(gloo::transport::UnboundBuffer& buffer);
  // `source` (optional) receives the rank whose message completed. While
  // it waits, the context's PeerWait (if any) names the peer of the oldest
  // receive posted on `buffer`.
  absl::Status WaitRecv(gloo::transport::UnboundBuffer& buffer, int* source = nullptr);
  // Receives of `buffer` from `peers` that were posted before this scope
  // began, by an earlier one (the negotiation posts a round's receives as
  // the round before it ends): WaitRecv names them as it names its own.
  void AdoptReceives(const gloo::transport::UnboundBuffer& buffer, absl::Span<const int> peers);

  // Sends to[p] of `send` to every peer p and receives from[p] of `recv`
  // from every peer, all in flight at once (the pairs to the peers with a
  // region in either connected first). Entries for this rank and empty
  // regions are skipped (a buffer may be null when all its regions are
  // empty); every rank must agree on the sizes.
  absl::Status ExchangeWithAll(gloo::transport::UnboundBuffer* send,
                               const std::vector<PeerRegion>& to,
                               gloo::transport::UnboundBuffer* recv,
                               const std::vector<PeerRegion>& from, Channel channel);

  // ExchangeWithAll in two halves, so the caller can run another collective
  // of the same context while this exchange is in flight: Post posts every
  // transfer and returns at once; Wait (called once) waits for them all.
  struct PostedExchange {
    gloo::transport::UnboundBuffer* send = nullptr;
    gloo::transport::UnboundBuffer* recv = nullptr;
    int sends = 0;
    int receives = 0;
  };
  absl::StatusOr<PostedExchange> PostExchange(gloo::transport::UnboundBuffer* send,
                                              const std::vector<PeerRegion>& to,
                                              gloo::transport::UnboundBuffer* recv,
                                              const std::vector<PeerRegion>& from, Channel channel);
  absl::Status WaitExchange(const PostedExchange& posted);

 private:
  // Connect's error, labelled (and the scope failed), or OK.
  absl::Status Connected(absl::Status connected);
  uint64_t SlotFor(Channel channel) const;
  std::chrono::milliseconds RemainingTime() const;
  // The wait itself, with Gloo's exceptions stopped.
  absl::Status WaitRecvFrom(gloo::transport::UnboundBuffer& buffer, int* source);
  absl::Status Fail(absl::Status status);
  absl::Status FromException(const std::exception& e);
  // Only once the context is aborted.
  absl::Status AbortedStatus() const;

  // First member: SIGPIPE stays blocked until everything below is gone.
  ScopedSigpipeBlock sigpipe_block_;
  GlooContext& context_;
  const std::string label_;
  const uint64_t sequence_;
  const absl::Time deadline_;
  absl::Status failure_;
  // Declared before buffers_ so it outlives them; back to the pool when
  // the collective ended well.
  std::vector<ScratchPool::Block> scratch_;
  // Destroyed after ~CollectiveScope's body has marked a failed context.
  std::vector<std::unique_ptr<RegisteredBuffer>> buffers_;
  // The receives posted and not yet waited for, by buffer and peer, where
  // the context records whom a wait is for (the global set's ring). Inline:
  // a ring step has one in flight, so a collective allocates nothing for it.
  absl::InlinedVector<std::pair<const gloo::transport::UnboundBuffer*, int>, 4> posted_receives_;
};

}  // namespace horovodd::internal
