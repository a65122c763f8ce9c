// How many streams each client holds open at once, so that no client can hold
// more than a configured number (limits.max_watch_streams_per_client,
// limits.max_attach_streams_per_client). Thread-safe.
//
// A client is its peer's address without the port ("ipv4:127.0.0.1:5555" is
// client "ipv4:127.0.0.1"): every connection has a port of its own, and one
// client may open many connections.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {

class ClientStreamLimiter {
 private:
  // Shared with every Slot, so a slot may outlive its limiter.
  struct Counts {
    absl::Mutex mu;
    std::map<std::string, int> open ABSL_GUARDED_BY(mu);  // by client; no zeros kept
  };

 public:
  // One open stream; the count goes down when it is destroyed. Move-only.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { Release(); }

    // Counts this stream in `gauge` too (a kind of stream the daemon
    // reports, e.g. its host streams) until the slot is released.
    void CountIn(std::shared_ptr<std::atomic<int64_t>> gauge);

   private:
    friend class ClientStreamLimiter;
    Slot(std::shared_ptr<Counts> counts, std::string client)
        : counts_(std::move(counts)), client_(std::move(client)) {}
    void Release();

    std::shared_ptr<Counts> counts_;  // null: holds nothing
    std::string client_;
    std::shared_ptr<std::atomic<int64_t>> gauge_;  // null: counted nowhere else
  };

  // `what` names the streams and `config_key` the limit in messages.
  ClientStreamLimiter(std::string what, std::string config_key, int max_per_client)
      : what_(std::move(what)), config_key_(std::move(config_key)), max_(max_per_client) {}

  // A slot for one more stream of `peer` (grpc's ServerContext::peer()), or
  // RESOURCE_EXHAUSTED naming the limit when it holds the most already.
  absl::StatusOr<Slot> Acquire(absl::string_view peer);
  // Streams `peer`'s client holds open now.
  int OpenStreams(absl::string_view peer) const;

  // The client of a peer address: everything before the port.
  static std::string ClientOf(absl::string_view peer);

 private:
  const std::string what_;
  const std::string config_key_;
  const int max_;
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
};

}  // namespace horovodd::daemon
