// Gloo's rendezvous store over the daemon's per-generation key-value space
// (KvSet/KvGet), so rings bootstrap through the daemon that already knows
// the job's members. Gloo's Store interface reports errors by exception: this
// store throws gloo::IoException for every failed call, and remembers when the
// daemon said the generation was superseded.
//
// Used by one thread at a time (the one connecting a ring).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/daemon_client.h"

namespace horovodd::internal {

class DaemonStore : public gloo::rendezvous::Store {
 public:
  // `client` must outlive the store. `timeout` bounds get() and a wait()
  // that names no timeout of its own.
  DaemonStore(DaemonClient& client, int64_t generation, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key like wait() does.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // True once the daemon answered ABORTED: the generation is over.
  bool superseded() const { return superseded_; }

 private:
  std::vector<std::string> Get(const std::vector<std::string>& keys, absl::Duration timeout);
  [[noreturn]] void Throw(const absl::Status& status);

  DaemonClient& client_;
  const int64_t generation_;
  const absl::Duration timeout_;
  bool superseded_ = false;
};

struct RingOptions {
  int64_t generation = 0;
  int rank = 0;
  int size = 0;
  std::string bind_address;
  // Bounds every store wait while connecting, and the ring's operations.
  absl::Duration timeout = absl::Seconds(30);
};

struct RingResult {
  absl::StatusOr<std::shared_ptr<gloo::Context>> ring;
  // On failure: true when the daemon superseded the generation meanwhile
  // (the failure is a consequence, not news to report).
  bool superseded = false;
};

// Connects generation `options.generation`'s ring through a DaemonStore
// under the key prefix "g<generation>".
RingResult ConnectRingThroughDaemon(DaemonClient& client, const RingOptions& options);

}  // namespace horovodd::internal
