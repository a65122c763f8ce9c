#include "gloo_context.h"

#include <exception>
#include <string>
#include <thread>
#include <vector>
#include <utility>

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sigpipe_block.h"

namespace horovodd::internal {

RegisteredBuffer::~RegisteredBuffer() { owner_.Unregister(buffer_.get()); }

GlooContext::GlooContext(int rank, int size, absl::Duration collective_timeout)
    : gloo::rendezvous::Context(rank, size), collective_timeout_(collective_timeout) {}

absl::Status GlooContext::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return HealthLocked();
}

absl::Status GlooContext::HealthLocked() const {
  if (aborted_) {
    return absl::AbortedError("the gloo context was aborted (its generation is superseded)");
  }
  return failure_;
}

bool GlooContext::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

absl::StatusOr<std::unique_ptr<RegisteredBuffer>> GlooContext::RegisterBuffer(void* data,
                                                                              size_t bytes) {
  // Created outside the lock: Gloo takes its own locks here.
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer = createUnboundBuffer(data, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_ || !failure_.ok()) return HealthLocked();
  buffers_.insert(buffer.get());
  return std::unique_ptr<RegisteredBuffer>(new RegisteredBuffer(*this, std::move(buffer)));
}

void GlooContext::Unregister(gloo::transport::UnboundBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.erase(buffer);
}

void GlooContext::ClosePairsLocked() {
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::unique_ptr<gloo::transport::Pair>& pair = getPair(peer);
    // close() holds the pair's lock and waits for the device loop to drop the
    // socket, so once it returns Gloo no longer reads into our buffers.
    if (pair) pair->close();
  }
}

void GlooContext::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  // Pairs first: after this no I/O thread touches the buffers woken below,
  // so their owners may free them as soon as they wake.
  ClosePairsLocked();
  for (gloo::transport::UnboundBuffer* buffer : buffers_) {
    buffer->abortWaitRecv();
    buffer->abortWaitSend();
  }
}

void GlooContext::ConnectFullMeshInParallel(gloo::rendezvous::Store& store,
                                            std::shared_ptr<gloo::transport::Device>& device) {
  std::shared_ptr<gloo::transport::Context> transport = device->createContext(rank, size);
  transport->setTimeout(getTimeout());
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
  device_ = device;
  transportContext_ = std::move(transport);
}

void GlooContext::MarkFailed(const absl::Status& failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = failure;
  ClosePairsLocked();
}

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(
    gloo::rendezvous::Store& store, const ConnectOptions& options) {
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
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot bind gloo to address '", options.bind_address, "': ", e.what()));
  }

  auto context = std::make_shared<GlooContext>(options.rank, options.size, options.timeout);
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  try {
    context->ConnectFullMeshInParallel(store, device);
  } catch (const std::exception& e) {
    std::string message = absl::StrCat("connecting gloo context (rank ", options.rank, " of ",
                                       options.size, ") failed: ", e.what());
    if (IsGlooTimeoutMessage(e.what())) return absl::DeadlineExceededError(message);
    return absl::UnavailableError(message);
  }
  return std::shared_ptr<gloo::Context>(std::move(context));
}

void AbortGlooContext(gloo::Context& context) {
  if (auto* ours = dynamic_cast<GlooContext*>(&context)) {
    ours->Abort();
    return;
  }
  context.closeConnections();
}

bool IsGlooTimeoutMessage(const std::string& what) {
  const std::string lower = absl::AsciiStrToLower(what);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

}  // namespace horovodd::internal
