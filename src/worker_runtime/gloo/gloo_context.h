// Gloo contexts for the worker's rings: connecting one through a rendezvous
// store, and aborting one while another thread is blocked in a collective.
//
// Why collectives here do not call Gloo's own algorithms (gloo::allreduce
// and friends): with Gloo 2022-05 nothing public wakes a thread blocked in
// one of them. Pair::close() and Context::closeConnections() only close the
// socket and mark the pair closed; they do not fail the operations pending
// on it, so the blocked thread sleeps in UnboundBuffer::waitRecv until its
// timeout. The call that does fail pending operations
// (tcp::Pair::signalExceptionExternal / tcp::Context::signalException) is
// protected, and its headers do not even compile from the Debian package
// (gloo/common/memory.h is not installed). So our collectives (gloo_ops.h)
// post every send and receive on unbound buffers registered with the
// GlooContext, and Abort() closes the pairs, then calls the public
// abortWaitSend()/abortWaitRecv() on each registered buffer.
//
// A lost peer needs no abort in most cases: Gloo fails every operation
// pending on a pair whose socket breaks, and a collective that fails closes
// all its context's pairs, so the failure spreads to every rank at once.
// The exception is a message Gloo is halfway through receiving or sending
// when the socket breaks (it is no longer "pending"): a collective waiting
// on exactly that message waits for its timeout, or for Abort().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/unbound_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/gloo/scratch_pool.h"

namespace horovodd::internal {

// Up to this many ranks a ring's collectives talk to every peer at once (the
// direct and pairwise allreduce, the allgather's exchange): a lazy ring
// that small connects every pair when it is built, in one round trip
// through the store, rather than most of them one key at a time in its
// first collective. Past it they go round the ring.
inline constexpr int kAllPeersMaxRanks = 16;

struct ConnectOptions {
  int rank = 0;
  int size = 1;
  // Local address the context's sockets bind to (a name or an IP literal).
  std::string bind_address = "127.0.0.1";
  // Bounds connecting (each store wait and pair connect) and, end to end,
  // each collective run on the context.
  absl::Duration timeout = absl::Seconds(30);
  // ConnectGlooContextLazily: false connects no pair before a collective
  // needs it. For a ring whose ranks all share one host's memory, where
  // only Adasum runs on the ring and a reset's every pair is CPU the
  // host's other ranks wait for.
  bool eager_pairs = true;
};

class GlooContext;
class LoopWaker;

// An unbound buffer that GlooContext::Abort() can wake. Unregisters itself
// before the Gloo buffer is destroyed, so Abort() never touches a dead one.
class RegisteredBuffer {
 public:
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;
  ~RegisteredBuffer();

  gloo::transport::UnboundBuffer& get() { return *buffer_; }

 private:
  friend class GlooContext;
  RegisteredBuffer(GlooContext& owner, std::unique_ptr<gloo::transport::UnboundBuffer> buffer)
      : owner_(owner), buffer_(std::move(buffer)) {}

  GlooContext& owner_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
};

// A Gloo TCP context that remembers why it died and can be aborted, and
// connects its pairs as its collectives need them (ConnectPeers).
// One thread at a time runs collectives on it (the collective thread);
// Abort() may come from any thread.
class GlooContext final : public gloo::rendezvous::Context {
 public:
  GlooContext(int rank, int size, absl::Duration collective_timeout);
  // Closes the pairs (waiting for a closing already started) and stops the
  // device without waiting out its loop's 10 ms ticks (see LoopWaker in the
  // .cc).
  ~GlooContext() override;

  absl::Duration collective_timeout() const { return collective_timeout_; }

  // A fresh number per collective; every rank draws them in the same order,
  // so consecutive collectives use distinct slots. Collective thread only.
  uint64_t NextCollectiveSequence() { return next_sequence_++; }

  // OK while usable. Otherwise the reason: ABORTED after Abort(), else the
  // first failure passed to MarkFailed().
  absl::Status health() const;
  bool aborted() const;

  // A buffer over [data, data + bytes) for this context's sends and receives;
  // fails with health() once the context is dead.
  absl::StatusOr<std::unique_ptr<RegisteredBuffer>> RegisterBuffer(void* data, size_t bytes);

  // Where collectives on this context get their scratch memory.
  ScratchPool& scratch_pool() { return scratch_pool_; }

  // Whether the ring's ranks are on more than one host and some host holds
  // several of them (comm_factory/host_layout.h learns it from the daemon's
  // layout, with shared memory on or off). There a flat allreduce goes by
  // the ring (gloo_allreduce.cc): the pairwise exchange sends every rank's
  // bytes to every other host, which grows with the ranks per host. Set
  // before the first collective; collective thread only.
  void set_spans_hosts_with_peers(bool spans) { spans_hosts_with_peers_ = spans; }
  bool spans_hosts_with_peers() const { return spans_hosts_with_peers_; }

  // Where the global set's ring records the peer a receive waits for (its
  // ranks are the job's); none for a process set's ring. Set before the
  // first collective; collective thread only.
  void set_peer_wait(std::shared_ptr<PeerWait> wait) { peer_wait_ = std::move(wait); }
  PeerWait* peer_wait() const { return peer_wait_.get(); }

  // Wakes every wait on a registered buffer (it fails ABORTED) and starts
  // closing every pair in the background (peers see the connections drop).
  // Idempotent. Waking before the pairs are closed is safe: a registered
  // buffer's Gloo buffer, destroyed with it, waits for any transfer into it
  // in flight, and the loop drops transfers for buffers that are gone.
  void Abort();

  // Connects the pairs to those of `peers` not connected yet (this rank
  // and repeats are skipped), all at once: a rank writes one rendezvous key
  // per new pair (its pair's address, under "<rank>-<peer>") and reads only
  // those peers' keys for it, in one wait. Every collective connects, before it posts
  // anything, the peers it will talk to, and those peers do the same in the
  // same collective, so a rank never connects to a peer it never talks to.
  // Collective thread only. What Gloo (or the store) throws stops here: a
  // timeout is DEADLINE_EXCEEDED, any other failure UNAVAILABLE; ABORTED
  // once the context is aborted; FAILED_PRECONDITION when no store was kept
  // (a context connected in full up front).
  absl::Status ConnectPeers(const std::vector<int>& peers);
  // ConnectPeers with one key write for all the new pairs (under
  // "<rank>.<batch>") instead of one per pair: for a collective that knows
  // every peer it will talk to up front. Every peer named must call it with
  // the same `batch` in the same collective, naming this rank.
  absl::Status ConnectPeersAtOnce(const std::vector<int>& peers, const std::string& batch);
  // The first pairs, before any collective: the ring's neighbours, or every
  // peer for a context connected up front. A rank's addresses for them go
  // under one key (its rank), and it reads those peers' keys only, in one
  // wait. Every rank's first peers must be the ones that name it among
  // theirs.
  absl::Status ConnectFirst(const std::vector<int>& peers);
  // A small record shared through the ring's rendezvous store (the one
  // ConnectPeers uses) rather than over pairs, for what one rank tells
  // many at set-up (comm_factory/host_layout.h: a host's segment). Keys
  // must not look like the pairs' ("<rank>", "<rank>-<peer>",
  // "<rank>.<batch>"). Collective thread only. FAILED_PRECONDITION without
  // a store; a timeout is DEADLINE_EXCEEDED, any other failure UNAVAILABLE
  // (ABORTED once the context is).
  bool has_store() const { return store_ != nullptr; }
  absl::Status PublishKey(const std::string& key, const std::vector<char>& value);
  // PublishKey even once the context failed or was aborted: a rank's last
  // word to peers that wait for it in the store (that it gave up).
  absl::Status PublishKeyDespiteFailure(const std::string& key, const std::vector<char>& value);
  // Waits (up to the context's timeout) until `key` is published.
  absl::StatusOr<std::vector<char>> ReadKey(const std::string& key);
  // Waits until every one of `keys` (at least one) is published (one wait),
  // then reads them.
  absl::StatusOr<std::vector<std::vector<char>>> ReadKeys(const std::vector<std::string>& keys);
  // Whether the pair to `peer` is connected. Collective thread only.
  bool connected(int peer) const { return connected_[peer] != 0; }
  // How many pairs are connected. Collective thread only.
  int connected_pairs() const { return connected_count_; }
  // Whether the context has its Gloo device (and the device its I/O
  // thread) yet: not before the first pair or buffer where it was started
  // with StartDeviceLater. Collective thread only.
  bool device_started() const { return deferred_bind_address_.empty(); }

  // Keeps `store` (scoped to this context's rendezvous) for ConnectPeers.
  // Once, before the first ConnectPeers.
  void KeepStore(std::shared_ptr<gloo::rendezvous::Store> store);
  // For connecting up front through a store the caller keeps: ConnectPeers
  // uses it until ForgetStore().
  void UseStore(gloo::rendezvous::Store& store) { store_ = &store; }
  void ForgetStore() { store_ = nullptr; }
  // Creates the transport context on `device`; before the first ConnectPeers.
  void Start(std::shared_ptr<gloo::transport::Device>& device);
  // Instead of Start: the device (its listening socket, and Gloo's I/O
  // thread, which wakes every 10 ms whatever it has to do) is made for the
  // first pair or buffer this context needs, bound to `bind_address`. For a
  // ring that may never connect a pair (every rank on one host: only Adasum
  // uses it), so that 256 such workers do not wake 25,600 times a second.
  void StartDeviceLater(std::string bind_address);

  // Records that a collective failed and starts closing every pair in the
  // background: a failed context is never reused, and closing makes the
  // peers still blocked on us fail now instead of at their timeout. Keeps
  // the first failure.
  void MarkFailed(const absl::Status& failure);

 private:
  friend class RegisteredBuffer;
  void Unregister(gloo::transport::UnboundBuffer* buffer) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status HealthLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once: closing the pairs waits for the device loop once per pair, which
  // the failing collective and the rejoin after it need not wait for.
  void StartClosingPairsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connecting `peers` (none connected yet, no repeats), with Gloo's
  // exceptions still flying; not OK when the pairs are closing already.
  // `batch`: null for one key per pair, else the suffix of this rank's one
  // key for all of them ("" for the first pairs).
  absl::Status Connect(const std::vector<int>& peers, const std::string* batch);
  // The deferred device (StartDeviceLater), made now if it was not yet;
  // before a pair or a buffer. Refused once the context was aborted or
  // failed; an address that cannot be bound is INVALID_ARGUMENT.
  absl::Status EnsureDevice() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ConnectOrThrow(const std::vector<int>& peers, const std::string* batch);
  // What a store call threw, as a status (see PublishKey).
  absl::Status StoreFailure(const std::string& what, const std::exception& e);
  void ClosePairs() ABSL_LOCKS_EXCLUDED(pairs_mu_);

  const absl::Duration collective_timeout_;
  uint64_t next_sequence_ = 0;  // collective thread only
  ScratchPool scratch_pool_;
  bool spans_hosts_with_peers_ = false;  // collective thread only
  std::shared_ptr<PeerWait> peer_wait_;  // collective thread only

  // Set once connecting starts; makes closing pairs prompt.
  std::unique_ptr<LoopWaker> waker_;

  // Where peers' pair addresses are read: kept_store_ for a context that
  // connects lazily, else the caller's store while it connects up front.
  std::shared_ptr<gloo::rendezvous::Store> kept_store_;
  gloo::rendezvous::Store* store_ = nullptr;  // collective thread only
  std::vector<char> connected_;               // by peer; collective thread only
  std::string deferred_bind_address_;         // collective thread only; empty once made
  int connected_count_ = 0;                   // collective thread only
  // Creating a pair (collective thread) against closing them all (the
  // closer thread): Gloo's pair table is not safe to change and read at once,
  // and a pair created after the closing would never be closed.
  absl::Mutex pairs_mu_;  // taken after mu_ where both are held
  bool pairs_closing_ ABSL_GUARDED_BY(pairs_mu_) = false;

  // Abort() and MarkFailed() come from any thread; collectives read health.
  mutable absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<gloo::transport::UnboundBuffer*> buffers_ ABSL_GUARDED_BY(mu_);
  // Closes the pairs once the context failed or was aborted; started under
  // mu_, joined by the destructor (alone by then) before anything it uses goes.
  std::thread closer_ ABSL_GUARDED_BY(mu_);
  bool closed_inline_ ABSL_GUARDED_BY(mu_) = false;  // no thread could be started
};

// Builds a Gloo TCP context through `store`, which the caller has scoped to
// one rendezvous round (e.g. a gloo::rendezvous::PrefixStore), with every
// pair connected before it returns (the caller may drop the store then).
// Bad options: INVALID_ARGUMENT; a timeout: DEADLINE_EXCEEDED; other connect
// failures: UNAVAILABLE.
absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                const ConnectOptions& options);

// The same, but the context keeps `store` and connects lazily: only its two
// ring neighbours before it returns (every peer up to kAllPeersMaxRanks
// ranks; none without options.eager_pairs), every other pair when a
// collective first needs it (GlooContext::ConnectPeers). A reset's rebuild then costs a rank two
// pairs and two keys past kAllPeersMaxRanks ranks, whatever the job's size.
absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooContextLazily(
    std::shared_ptr<gloo::rendezvous::Store> store, const ConnectOptions& options);

// What connecting Gloo contexts cost this process so far, summed over every
// context it connected: the pairs connected, and the rendezvous keys read
// (and their bytes). Monotonic; the reset benchmark logs it with each step
// and takes differences, to show a ring rebuild's per-rank work.
struct RingConnectTotals {
  int64_t pairs_connected = 0;
  int64_t keys_read = 0;
  int64_t key_bytes_read = 0;
};
RingConnectTotals ProcessRingConnectTotals();

// Makes collectives blocked on `context` in other threads return ABORTED
// promptly, and every later one return ABORTED at once. Used when the daemon
// says the generation is superseded. Safe from any thread, more than once.
// The same as context.Abort().
void AbortGlooContext(GlooContext& context);

// The deadline of a collective on `context` that starts now.
inline absl::Time CollectiveDeadline(const GlooContext& context) {
  return absl::Now() + context.collective_timeout();
}

// True for the messages Gloo gives its timeouts ("Timed out waiting ...",
// "Connect timeout", "Read timeout", "Wait timeout for key(s)"): Gloo
// throws the same exception type for timeouts and for lost peers.
bool IsGlooTimeoutMessage(const std::string& what);

}  // namespace horovodd::internal
