#include "worker_runtime/daemon_client/daemon_kv_store.h"

#include <utility>

#include <gloo/rendezvous/prefix_store.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/kv_client/gloo_kv_store.h"

namespace horovodd::internal {

std::vector<std::string> DaemonKvStore::Prefixed(const std::vector<std::string>& keys) const {
  if (key_prefix_.empty()) return keys;
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(absl::StrCat(key_prefix_, key));
  return prefixed;
}

absl::Status DaemonKvStore::Set(const std::string& key, std::string value) {
  return daemon_.KvSet(generation_, absl::StrCat(key_prefix_, key), std::move(value));
}

absl::StatusOr<std::vector<std::string>> DaemonKvStore::Get(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  return daemon_.KvGet(generation_, Prefixed(keys), timeout);
}

absl::Status DaemonKvStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  return daemon_.KvGet(generation_, Prefixed(keys), timeout).status();
}

RingResult ConnectRingThroughStore(KvStore& store, const RingOptions& options) {
  GlooKvStore gloo_store(store, options.timeout);
  gloo::rendezvous::PrefixStore prefixed(absl::StrCat("g", options.generation, options.key_scope),
                                         gloo_store);
  ConnectOptions connect;
  connect.rank = options.rank;
  connect.size = options.size;
  connect.bind_address = options.bind_address;
  connect.timeout = options.timeout;
  RingResult result{ConnectGlooContext(prefixed, connect), false};
  result.superseded = !result.ring.ok() && gloo_store.superseded();
  return result;
}

RingResult ConnectRingThroughDaemon(DaemonConnection& daemon, const RingOptions& options) {
  DaemonKvStore store(daemon, options.generation);
  return ConnectRingThroughStore(store, options);
}

}  // namespace horovodd::internal
