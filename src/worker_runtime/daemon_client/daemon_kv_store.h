// A generation's key-value namespace in the daemon (KvSet/KvGet) as a
// KvStore, and connecting that generation's ring through it: rings bootstrap
// through the daemon that already knows the job's members.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker_runtime/gloo/gloo_context.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/daemon_client/daemon_connection.h"
#include "worker_runtime/kv_client/kv_store.h"

namespace horovodd::internal {

// The daemon's codes are KvStore's: DEADLINE_EXCEEDED, ABORTED once the
// generation is superseded. Thread-safe as the connection is.
class DaemonKvStore final : public KvStore {
 public:
  // `daemon` must outlive the store. Every key is put under `key_prefix`
  // (see RingOptions::key_scope: a ring's keys stay apart from another's).
  DaemonKvStore(DaemonConnection& daemon, int64_t generation, std::string key_prefix = "")
      : daemon_(daemon), generation_(generation), key_prefix_(std::move(key_prefix)) {}

  absl::Status Set(const std::string& key, std::string value) override;
  // One KvGet for all keys.
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  DaemonConnection& daemon_;
  const int64_t generation_;
  const std::string key_prefix_;
};

struct RingOptions {
  int64_t generation = 0;
  int rank = 0;
  int size = 0;
  std::string bind_address;
  // Appended to "g<generation>" in the key prefix. Empty for the
  // generation's first global ring; every other ring the ranks build in the
  // same generation (after shutdown and init again in one process, or for
  // a process set) names its own, so no rank reads a previous ring's
  // addresses (which would be refused: nobody listens there any more).
  std::string key_scope;
  // Bounds every store wait while connecting, and the ring's operations.
  absl::Duration timeout = absl::Seconds(30);
  // ConnectOptions::eager_pairs: false when every rank is on one host whose
  // shared memory carries the collectives.
  bool eager_pairs = true;
};

struct RingResult {
  absl::StatusOr<std::shared_ptr<GlooContext>> ring;
  // On failure: true when the store said the generation was superseded
  // meanwhile (the failure is a consequence, not news to report).
  bool superseded = false;
};

// Connects generation `options.generation`'s ring through `store` (that
// generation's namespace), under the key prefix "g<generation><key_scope>",
// every pair before it returns.
RingResult ConnectRingThroughStore(KvStore& store, const RingOptions& options);

// The same, but the ring keeps `store` and connects its pairs lazily: its
// two neighbours now, any other when a collective first talks to it
// (ConnectGlooContextLazily).
RingResult ConnectRingLazilyThroughStore(std::shared_ptr<KvStore> store,
                                         const RingOptions& options);

// ConnectRingLazilyThroughStore through the daemon's namespace for the
// generation; `daemon` must outlive the ring.
RingResult ConnectRingThroughDaemon(DaemonConnection& daemon, const RingOptions& options);

}  // namespace horovodd::internal
