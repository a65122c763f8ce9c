// How the ranks of one generation agree on the NCCL unique id: rank 0 makes
// it and publishes it under one key of the generation's key-value store;
// every other rank waits for that key. Free of gRPC and of NCCL, so it is
// tested over an in-process store.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/kv_client/kv_store.h"

namespace horovodd::internal {

// The key the unique id lives under, inside its generation's store.
inline constexpr char kNcclUniqueIdKey[] = "nccl/unique_id";

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
// something else under the key); other errors come from make_id or the store
// (its codes: kv_store.h), prefixed with what was being done.
absl::StatusOr<std::string> ExchangeUniqueId(KvStore& store, const UniqueIdExchange& exchange);

}  // namespace horovodd::internal
