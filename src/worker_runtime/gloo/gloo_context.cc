#include "worker_runtime/gloo/gloo_context.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/sigpipe_block.h"

namespace horovodd::internal {

// Gloo 2022-05's TCP device runs an epoll loop that wakes when a descriptor
// is ready or every 10 ms, and closing a pair (or stopping the device) from
// another thread waits for its next wake-up. On an idle context that is up
// to 10 ms per pair, one pair after another, on the way from a lost peer to
// the reset. While a LoopWaker is held, an eventfd it registered with the loop
// (level-triggered, never read by the loop) stays readable, so the loop
// wakes back to back and every close returns at once. It is held only
// around the teardown in the destructor, which takes microseconds. Pairs
// closed because the context failed close on a thread of their own, without
// it (see ClosePairs).
class LoopWaker final : public gloo::transport::tcp::Handler {
 public:
  // Null when the device is not Gloo's TCP device or no eventfd is left;
  // closing then just takes Gloo's own time.
  static std::unique_ptr<LoopWaker> Create(const std::shared_ptr<gloo::transport::Device>& device) {
    auto* tcp = dynamic_cast<gloo::transport::tcp::Device*>(device.get());
    if (tcp == nullptr) return nullptr;
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return nullptr;
    std::unique_ptr<LoopWaker> waker(new LoopWaker(fd));
    tcp->registerDescriptor(fd, EPOLLIN, waker.get());
    return waker;
  }

  // After the device is gone (its loop stopped) or unregistered.
  ~LoopWaker() override { close(fd_); }

  // Holds (counted, so that nested holds are harmless).
  void Hold() {
    absl::MutexLock lock(&mu_);
    if (holders_++ > 0) return;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    if (--holders_ > 0) return;
    uint64_t count = 0;
    [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof(count));
  }

  int fd() const { return fd_; }

  // The loop calls this while the eventfd is readable; waking was the point.
  void handleEvents(int /*events*/) override {}

 private:
  explicit LoopWaker(int fd) : fd_(fd) {}

  const int fd_;
  absl::Mutex mu_;
  int holders_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

std::atomic<int64_t> pairs_connected_total{0};
std::atomic<int64_t> keys_read_total{0};
std::atomic<int64_t> key_bytes_read_total{0};

class ScopedWake {
 public:
  explicit ScopedWake(LoopWaker* waker) : waker_(waker) {
    if (waker_ != nullptr) waker_->Hold();
  }
  ~ScopedWake() {
    if (waker_ != nullptr) waker_->Release();
  }
  ScopedWake(const ScopedWake&) = delete;
  ScopedWake& operator=(const ScopedWake&) = delete;

 private:
  LoopWaker* waker_;
};

// A TCP device bound to `bind_address`; its I/O thread starts here, with
// SIGPIPE blocked (it inherits the mask).
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> MakeDevice(
    const std::string& bind_address) {
  const ScopedSigpipeBlock sigpipe_block;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = bind_address;
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot bind gloo to address '", bind_address, "': ", e.what()));
  }
}

}  // namespace

RegisteredBuffer::~RegisteredBuffer() { owner_.Unregister(buffer_.get()); }

GlooContext::GlooContext(int rank, int size, absl::Duration collective_timeout)
    : gloo::rendezvous::Context(rank, size), collective_timeout_(collective_timeout) {}

GlooContext::~GlooContext() {
  std::thread closer;
  {
    absl::MutexLock lock(&mu_);
    closer = std::move(closer_);
  }
  if (closer.joinable()) closer.join();
  if (waker_ == nullptr) return;
  // The pairs and then the device (the last owner, its loop thread joined)
  // go while the loop is kept awake; the waker's fd is closed after that.
  ScopedWake wake(waker_.get());
  transportContext_.reset();
  std::weak_ptr<gloo::transport::Device> device = device_;
  device_.reset();
  if (std::shared_ptr<gloo::transport::Device> alive = device.lock()) {
    // Someone else keeps the device: take the waker out of its loop.
    static_cast<gloo::transport::tcp::Device&>(*alive).unregisterDescriptor(waker_->fd(),
                                                                            waker_.get());
  }
}

absl::Status GlooContext::health() const {
  absl::MutexLock lock(&mu_);
  return HealthLocked();
}

absl::Status GlooContext::HealthLocked() const {
  if (aborted_) {
    return absl::AbortedError("the gloo context was aborted (its generation is superseded)");
  }
  return failure_;
}

bool GlooContext::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

absl::StatusOr<std::unique_ptr<RegisteredBuffer>> GlooContext::RegisterBuffer(void* data,
                                                                              size_t bytes) {
  HVDD_RETURN_IF_ERROR(EnsureDevice());
  // Created outside the lock: Gloo takes its own locks here.
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer = createUnboundBuffer(data, bytes);
  absl::MutexLock lock(&mu_);
  if (aborted_ || !failure_.ok()) return HealthLocked();
  buffers_.insert(buffer.get());
  return std::unique_ptr<RegisteredBuffer>(new RegisteredBuffer(*this, std::move(buffer)));
}

void GlooContext::Unregister(gloo::transport::UnboundBuffer* buffer) {
  absl::MutexLock lock(&mu_);
  buffers_.erase(buffer);
}

void GlooContext::StartClosingPairsLocked() {
  if (closer_.joinable() || closed_inline_ || transportContext_ == nullptr) return;
  try {
    closer_ = std::thread([this] { ClosePairs(); });
  } catch (const std::system_error&) {
    // No thread to be had (this may run in a destructor): close them here.
    closed_inline_ = true;
    ClosePairs();
  }
}

void GlooContext::ClosePairs() {
  // Without the waker: each close() waits for the loop's own next turn (at
  // most its 10 ms tick, sooner while its sockets are busy). Nothing waits
  // for these closes but the destructor, and a loop kept spinning on every
  // rank of a job at once starved the rings being connected for the next
  // generation on a busy machine.
  absl::MutexLock lock(&pairs_mu_);
  pairs_closing_ = true;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::unique_ptr<gloo::transport::Pair>& pair = getPair(peer);
    try {
      if (pair) pair->close();
    } catch (const std::exception&) {
      // A pair that failed has nothing left to close.
    }
  }
}

void GlooContext::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
  for (gloo::transport::UnboundBuffer* buffer : buffers_) {
    buffer->abortWaitRecv();
    buffer->abortWaitSend();
  }
  StartClosingPairsLocked();
}

void GlooContext::Start(std::shared_ptr<gloo::transport::Device>& device) {
  std::shared_ptr<gloo::transport::Context> transport = device->createContext(rank, size);
  transport->setTimeout(getTimeout());
  // Owned from the start, so that the destructor also tears down (promptly,
  // with the waker) a context whose connect failed.
  device_ = device;
  transportContext_ = transport;
  waker_ = LoopWaker::Create(device);
  connected_.assign(size, 0);
}

void GlooContext::StartDeviceLater(std::string bind_address) {
  HVDD_CHECK(!bind_address.empty());
  deferred_bind_address_ = std::move(bind_address);
  connected_.assign(size, 0);
}

absl::Status GlooContext::EnsureDevice() {
  if (deferred_bind_address_.empty()) return absl::OkStatus();  // made, or by Start
  absl::MutexLock lock(&mu_);  // against Abort's look at the transport context
  HVDD_RETURN_IF_ERROR(HealthLocked());
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device,
                        MakeDevice(deferred_bind_address_));
  Start(device);
  deferred_bind_address_.clear();
  return absl::OkStatus();
}

void GlooContext::KeepStore(std::shared_ptr<gloo::rendezvous::Store> store) {
  kept_store_ = std::move(store);
  store_ = kept_store_.get();
}

absl::Status GlooContext::ConnectPeers(const std::vector<int>& peers) {
  return Connect(peers, /*batch=*/nullptr);
}

absl::Status GlooContext::ConnectPeersAtOnce(const std::vector<int>& peers,
                                             const std::string& batch) {
  HVDD_CHECK(!batch.empty());
  const std::string suffix = absl::StrCat(".", batch);
  return Connect(peers, &suffix);
}

absl::Status GlooContext::ConnectFirst(const std::vector<int>& peers) {
  HVDD_CHECK_EQ(connected_count_, 0);
  const std::string first;
  return Connect(peers, &first);
}

absl::Status GlooContext::Connect(const std::vector<int>& peers, const std::string* batch) {
  std::vector<int> missing;
  for (int peer : peers) {
    HVDD_CHECK(peer >= 0 && peer < size);
    if (peer == rank || connected_[peer] != 0) continue;
    if (std::find(missing.begin(), missing.end(), peer) != missing.end()) continue;
    missing.push_back(peer);
  }
  if (missing.empty()) return absl::OkStatus();
  HVDD_RETURN_IF_ERROR(health());
  HVDD_RETURN_IF_ERROR(EnsureDevice());
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo context (rank ", rank, " of ", size,
                     ") has no rendezvous store to connect to rank ", missing.front(), " with"));
  }
  // Also inherited by the connecting threads.
  const ScopedSigpipeBlock sigpipe_block;
  try {
    return ConnectOrThrow(missing, batch);
  } catch (const std::exception& e) {
    if (aborted()) return health();
    std::string message =
        absl::StrCat("connecting gloo context (rank ", rank, " of ", size, ") failed: ", e.what());
    if (IsGlooTimeoutMessage(e.what())) return absl::DeadlineExceededError(message);
    return absl::UnavailableError(message);
  }
}

namespace {

// The key under which `from` publishes its pair's address for `to`, for a
// pair connected after the first ones.
std::string PairKey(int from, int to) { return absl::StrCat(from, "-", to); }

// A batch of pairs' addresses goes under one key per rank (its rank, then
// the batch's suffix): for each pair, the peer (int32), the address's
// length (uint32), the address.
void AppendEntry(std::vector<char>& key, int peer, const std::vector<char>& address) {
  const int32_t who = peer;
  const uint32_t length = static_cast<uint32_t>(address.size());
  key.insert(key.end(), reinterpret_cast<const char*>(&who),
             reinterpret_cast<const char*>(&who) + sizeof(who));
  key.insert(key.end(), reinterpret_cast<const char*>(&length),
             reinterpret_cast<const char*>(&length) + sizeof(length));
  key.insert(key.end(), address.begin(), address.end());
}

// The address for `peer` in a key AppendEntry wrote; throws when it is not
// there (a rank that disagrees on who its first peers are).
std::vector<char> FindEntry(const std::vector<char>& key, int peer, int owner) {
  size_t at = 0;
  while (at + sizeof(int32_t) + sizeof(uint32_t) <= key.size()) {
    int32_t who = 0;
    uint32_t length = 0;
    std::memcpy(&who, key.data() + at, sizeof(who));
    std::memcpy(&length, key.data() + at + sizeof(who), sizeof(length));
    at += sizeof(who) + sizeof(length);
    if (at + length > key.size()) break;
    if (who == peer) return std::vector<char>(key.begin() + at, key.begin() + at + length);
    at += length;
  }
  throw std::runtime_error(
      absl::StrCat("rank ", owner, "'s rendezvous key has no address for rank ", peer));
}

}  // namespace

absl::Status GlooContext::ConnectOrThrow(const std::vector<int>& peers, const std::string* batch) {
  std::vector<std::vector<char>> ours(peers.size());
  {
    absl::MutexLock lock(&pairs_mu_);
    if (pairs_closing_) return health();
    for (size_t i = 0; i < peers.size(); ++i) {
      ours[i] = transportContext_->createPair(peers[i])->address().bytes();
    }
  }
  // One key write for a batch (one per pair otherwise), and one wait for
  // all the peers' keys (one round trip through the daemon's store).
  std::vector<std::string> their_keys;
  if (batch != nullptr) {
    std::vector<char> key;
    for (size_t i = 0; i < peers.size(); ++i) AppendEntry(key, peers[i], ours[i]);
    store_->set(absl::StrCat(rank, *batch), key);
    for (int peer : peers) their_keys.push_back(absl::StrCat(peer, *batch));
  } else {
    for (size_t i = 0; i < peers.size(); ++i) {
      store_->set(PairKey(rank, peers[i]), ours[i]);
      their_keys.push_back(PairKey(peers[i], rank));
    }
  }
  store_->wait(their_keys, getTimeout());
  std::vector<std::vector<char>> theirs(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    std::vector<char> key = store_->get(their_keys[i]);
    keys_read_total.fetch_add(1, std::memory_order_relaxed);
    key_bytes_read_total.fetch_add(static_cast<int64_t>(key.size()), std::memory_order_relaxed);
    theirs[i] = batch != nullptr ? FindEntry(key, rank, peers[i]) : std::move(key);
  }
  // Gloo's connect() blocks until the pair is connected: one thread per
  // pair, so n pairs connect in about one connect's time rather than n in a
  // row. The threads inherit this thread's signal mask (SIGPIPE blocked),
  // and each touches only its own pair.
  std::vector<std::exception_ptr> errors(peers.size());
  auto connect = [&](size_t i) {
    try {
      transportContext_->getPair(peers[i])->connect(theirs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (peers.size() == 1) {
    connect(0);
  } else {
    std::vector<std::thread> connecting;
    connecting.reserve(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) connecting.emplace_back(connect, i);
    for (std::thread& thread : connecting) thread.join();
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  // A pair that an abort closed while it connected returns from connect()
  // without an error; it must not count as usable.
  HVDD_RETURN_IF_ERROR(health());
  for (int peer : peers) connected_[peer] = 1;
  connected_count_ += static_cast<int>(peers.size());
  pairs_connected_total.fetch_add(static_cast<int64_t>(peers.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status GlooContext::StoreFailure(const std::string& what, const std::exception& e) {
  if (aborted()) return health();
  std::string message =
      absl::StrCat(what, " (gloo context rank ", rank, " of ", size, ") failed: ", e.what());
  if (IsGlooTimeoutMessage(e.what())) return absl::DeadlineExceededError(message);
  return absl::UnavailableError(message);
}

absl::Status GlooContext::PublishKey(const std::string& key, const std::vector<char>& value) {
  HVDD_RETURN_IF_ERROR(health());
  return PublishKeyDespiteFailure(key, value);
}

absl::Status GlooContext::PublishKeyDespiteFailure(const std::string& key,
                                                   const std::vector<char>& value) {
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo context (rank ", rank, ") has no rendezvous store to publish ", key));
  }
  try {
    store_->set(key, value);
  } catch (const std::exception& e) {
    return StoreFailure(absl::StrCat("publishing ", key), e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> GlooContext::ReadKey(const std::string& key) {
  HVDD_ASSIGN_OR_RETURN(std::vector<std::vector<char>> values, ReadKeys({key}));
  return std::move(values.front());
}

absl::StatusOr<std::vector<std::vector<char>>> GlooContext::ReadKeys(
    const std::vector<std::string>& keys) {
  HVDD_CHECK(!keys.empty());
  HVDD_RETURN_IF_ERROR(health());
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gloo context (rank ", rank, ") has no rendezvous store to read ", keys.front()));
  }
  try {
    // One wait for all (through the daemon: one round trip, whose answer
    // the gets then read).
    store_->wait(keys, getTimeout());
    std::vector<std::vector<char>> values;
    values.reserve(keys.size());
    for (const std::string& key : keys) {
      values.push_back(store_->get(key));
      keys_read_total.fetch_add(1, std::memory_order_relaxed);
      key_bytes_read_total.fetch_add(static_cast<int64_t>(values.back().size()),
                                     std::memory_order_relaxed);
    }
    return values;
  } catch (const std::exception& e) {
    return StoreFailure(keys.size() == 1
                            ? absl::StrCat("reading ", keys.front())
                            : absl::StrCat("reading ", keys.size(), " keys from ", keys.front()),
                        e);
  }
}

void GlooContext::MarkFailed(const absl::Status& failure) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = failure;
  StartClosingPairsLocked();
}

namespace {

absl::Status CheckOptions(const ConnectOptions& options) {
  if (options.size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo context size must be at least 1, got ", options.size));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo context rank ", options.rank,
                                                   " is out of range for size ", options.size));
  }
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo context timeout must be at least 1ms, got ", absl::FormatDuration(options.timeout)));
  }
  if (options.bind_address.empty()) {
    return absl::InvalidArgumentError("gloo context bind address is empty");
  }
  return absl::OkStatus();
}

// A context on a device of its own (made now, or with its first pair or
// buffer where no pair is connected up front), its pairs not connected yet.
absl::StatusOr<std::shared_ptr<GlooContext>> StartGlooContext(const ConnectOptions& options) {
  HVDD_RETURN_IF_ERROR(CheckOptions(options));
  auto context = std::make_shared<GlooContext>(options.rank, options.size, options.timeout);
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  if (!options.eager_pairs) {
    context->StartDeviceLater(options.bind_address);
    return context;
  }
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device,
                        MakeDevice(options.bind_address));
  context->Start(device);
  return context;
}

}  // namespace

absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                const ConnectOptions& options) {
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<GlooContext> context, StartGlooContext(options));
  std::vector<int> everyone;
  for (int peer = 0; peer < options.size; ++peer) everyone.push_back(peer);
  context->UseStore(store);
  absl::Status connected = context->ConnectFirst(everyone);
  context->ForgetStore();
  HVDD_RETURN_IF_ERROR(connected);
  return context;
}

absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooContextLazily(
    std::shared_ptr<gloo::rendezvous::Store> store, const ConnectOptions& options) {
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<GlooContext> context, StartGlooContext(options));
  context->KeepStore(std::move(store));
  const int n = options.size;
  std::vector<int> first = {(options.rank + 1) % n, (options.rank + n - 1) % n};
  if (n <= kAllPeersMaxRanks) {
    first.clear();
    for (int peer = 0; peer < n; ++peer) first.push_back(peer);
  }
  if (!options.eager_pairs) first.clear();
  HVDD_RETURN_IF_ERROR(context->ConnectFirst(first));
  return context;
}

void AbortGlooContext(GlooContext& context) { context.Abort(); }

RingConnectTotals ProcessRingConnectTotals() {
  RingConnectTotals totals;
  totals.pairs_connected = pairs_connected_total.load(std::memory_order_relaxed);
  totals.keys_read = keys_read_total.load(std::memory_order_relaxed);
  totals.key_bytes_read = key_bytes_read_total.load(std::memory_order_relaxed);
  return totals;
}

bool IsGlooTimeoutMessage(const std::string& what) {
  const std::string lower = absl::AsciiStrToLower(what);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

}  // namespace horovodd::internal
