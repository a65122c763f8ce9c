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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/runtime/daemon_client.h"

namespace horovodd::internal {

class DaemonStore : public gloo::rendezvous::Store {
 public:
  // `client` must outlive the store. `timeout` bounds get() and a wait()
  // that names no timeout of its own.
  DaemonStore(DaemonClient& client, int64_t generation, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key like wait() does. A key an earlier wait() or get()
  // already read is answered without asking the daemon again: Gloo waits for
  // all its peers' keys at once and then gets them one by one, and those
  // gets would be one round trip per peer, one after the other.
  std::vector<char> get(const std::string& key) override;
  // One KvGet for all keys; keeps their values for get().
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
  // Values already read. A key of a generation is written once, by the rank
  // that owns it, before anyone reads it, so a value read stays current for
  // the life of the store (one ring's bootstrap).
  std::map<std::string, std::vector<char>> read_;
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
