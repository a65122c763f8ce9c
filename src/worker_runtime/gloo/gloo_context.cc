#include "worker_runtime/gloo/gloo_context.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>
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

absl::Status GlooContext::ConnectFullMeshInParallel(
    gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device>& device) {
  try {
    ConnectOrThrow(store, device);
  } catch (const std::exception& e) {
    std::string message =
        absl::StrCat("connecting gloo context (rank ", rank, " of ", size, ") failed: ", e.what());
    if (IsGlooTimeoutMessage(e.what())) return absl::DeadlineExceededError(message);
    return absl::UnavailableError(message);
  }
  return absl::OkStatus();
}

void GlooContext::ConnectOrThrow(gloo::rendezvous::Store& store,
                                 std::shared_ptr<gloo::transport::Device>& device) {
  std::shared_ptr<gloo::transport::Context> transport = device->createContext(rank, size);
  transport->setTimeout(getTimeout());
  // Owned from the start, so that the destructor also tears down (promptly,
  // with the waker) a context whose connect failed.
  device_ = device;
  transportContext_ = transport;
  waker_ = LoopWaker::Create(device);
  // Our key holds the address of each of our pairs, in peer order (Gloo's
  // layout, which extractAddress reads).
  std::vector<char> our_addresses;
  std::vector<std::string> peer_keys;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::vector<char> bytes = transport->createPair(peer)->address().bytes();
    our_addresses.insert(our_addresses.end(), bytes.begin(), bytes.end());
    peer_keys.push_back(std::to_string(peer));
  }
  store.set(std::to_string(rank), our_addresses);
  if (!peer_keys.empty()) store.wait(peer_keys, getTimeout());
  std::vector<std::vector<char>> addresses(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::vector<char> theirs = store.get(std::to_string(peer));
    addresses[peer] = extractAddress(theirs, peer);
  }
  // The threads inherit this thread's signal mask (SIGPIPE blocked by the
  // caller), and each touches only its own pair.
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> connecting;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    connecting.emplace_back([&, peer] {
      try {
        transport->getPair(peer)->connect(addresses[peer]);
      } catch (...) {
        errors[peer] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : connecting) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

void GlooContext::MarkFailed(const absl::Status& failure) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = failure;
  StartClosingPairsLocked();
}

absl::StatusOr<std::shared_ptr<GlooContext>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                const ConnectOptions& options) {
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

  // Also inherited by the device's I/O thread, created here.
  const ScopedSigpipeBlock sigpipe_block;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.bind_address;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot bind gloo to address '", options.bind_address, "': ", e.what()));
  }

  auto context = std::make_shared<GlooContext>(options.rank, options.size, options.timeout);
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  HVDD_RETURN_IF_ERROR(context->ConnectFullMeshInParallel(store, device));
  return context;
}

void AbortGlooContext(GlooContext& context) { context.Abort(); }

bool IsGlooTimeoutMessage(const std::string& what) {
  const std::string lower = absl::AsciiStrToLower(what);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

}  // namespace horovodd::internal
