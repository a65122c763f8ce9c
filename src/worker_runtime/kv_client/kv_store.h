// The key-value store the ranks of one generation bootstrap through: Gloo's
// rendezvous (each rank's address, gloo_kv_store.h) and the NCCL unique id
// (gpu/unique_id_exchange.h). One namespace per store object; a key is
// written once, by the rank that owns it, and read by its peers.
//
// Implementations: the daemon's per-generation namespace (daemon_client/
// daemon_kv_store.h) and an in-process map (in_memory_kv_store.h) for tests
// and for ranks that share a process.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace horovodd::internal {

// Error codes every implementation uses, so callers can tell them apart:
//   DEADLINE_EXCEEDED  a key did not appear within the timeout;
//   ABORTED            the namespace is gone (its generation was superseded):
//                      no later call can succeed;
//   anything else      the store itself failed (e.g. UNAVAILABLE).
class KvStore {
 public:
  virtual ~KvStore() = default;

  virtual absl::Status Set(const std::string& key, std::string value) = 0;

  // The values of all `keys`, in order, once all exist; waits up to
  // `timeout` for them. One call, however many keys: a rank waiting for all
  // its peers asks once, not once per peer.
  virtual absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                                       absl::Duration timeout) = 0;

  // Get without the values: waits up to `timeout` for all `keys` to exist.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
};

// Get of one key.
absl::StatusOr<std::string> GetKey(KvStore& store, const std::string& key, absl::Duration timeout);

}  // namespace horovodd::internal
