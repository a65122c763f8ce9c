// How the ranks of one generation agree on the NCCL unique id: rank 0 makes
// it and publishes it under one key of the generation's key-value namespace
// in the daemon; every other rank waits for that key. The store interface
// keeps this free of gRPC and of NCCL, so it is tested with a fake store.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace horovodd::internal {

// The key the unique id lives under, inside its generation's namespace.
inline constexpr char kNcclUniqueIdKey[] = "nccl/unique_id";

// One generation's key-value namespace. Implementations return the daemon's
// codes: ABORTED once the generation is superseded, DEADLINE_EXCEEDED when a
// key does not appear within the timeout.
class UniqueIdStore {
 public:
  virtual ~UniqueIdStore() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for the key to exist.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

struct UniqueIdExchange {
  int rank = 0;
  // Size every rank expects the id to have (NCCL_UNIQUE_ID_BYTES).
  size_t id_bytes = 0;
  // Bounds rank > 0's wait for rank 0's id.
  absl::Duration timeout = absl::Seconds(30);
  // Rank 0 only: makes a fresh id (ncclGetUniqueId).
  std::function<absl::StatusOr<std::string>()> make_id;
};

// Rank 0: make_id(), then Set(kNcclUniqueIdKey). Other ranks: Get it.
// Returns the id. INTERNAL when the id has the wrong size (a store holding
// something else under the key); other errors come from make_id or the store,
// prefixed with what was being done.
absl::StatusOr<std::string> ExchangeUniqueId(UniqueIdStore& store,
                                             const UniqueIdExchange& exchange);

}  // namespace horovodd::internal
