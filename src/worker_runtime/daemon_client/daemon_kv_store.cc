#include "worker_runtime/daemon_client/daemon_kv_store.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

namespace {

ConnectOptions ToConnectOptions(const RingOptions& options) {
  ConnectOptions connect;
  connect.rank = options.rank;
  connect.size = options.size;
  connect.bind_address = options.bind_address;
  connect.timeout = options.timeout;
  connect.eager_pairs = options.eager_pairs;
  return connect;
}

std::string RingPrefix(const RingOptions& options) {
  return absl::StrCat("g", options.generation, options.key_scope);
}

// A ring's rendezvous store for the life of the ring: the KvStore, Gloo's
// view of it and the ring's prefix, owned together.
class KeptRingStore final : public gloo::rendezvous::Store {
 public:
  KeptRingStore(std::shared_ptr<KvStore> store, const RingOptions& options)
      : store_(std::move(store)),
        gloo_store_(*store_, options.timeout),
        prefixed_(RingPrefix(options), gloo_store_) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    prefixed_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return prefixed_.get(key); }
  void wait(const std::vector<std::string>& keys) override { prefixed_.wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    prefixed_.wait(keys, timeout);
  }

  bool superseded() const { return gloo_store_.superseded(); }

 private:
  const std::shared_ptr<KvStore> store_;
  GlooKvStore gloo_store_;
  gloo::rendezvous::PrefixStore prefixed_;
};

}  // namespace

RingResult ConnectRingThroughStore(KvStore& store, const RingOptions& options) {
  GlooKvStore gloo_store(store, options.timeout);
  gloo::rendezvous::PrefixStore prefixed(RingPrefix(options), gloo_store);
  RingResult result{ConnectGlooContext(prefixed, ToConnectOptions(options)), false};
  result.superseded = !result.ring.ok() && gloo_store.superseded();
  return result;
}

RingResult ConnectRingLazilyThroughStore(std::shared_ptr<KvStore> store,
                                         const RingOptions& options) {
  auto kept = std::make_shared<KeptRingStore>(std::move(store), options);
  RingResult result{ConnectGlooContextLazily(kept, ToConnectOptions(options)), false};
  result.superseded = !result.ring.ok() && kept->superseded();
  return result;
}

RingResult ConnectRingThroughDaemon(DaemonConnection& daemon, const RingOptions& options) {
  return ConnectRingLazilyThroughStore(std::make_shared<DaemonKvStore>(daemon, options.generation),
                                       options);
}

}  // namespace horovodd::internal
