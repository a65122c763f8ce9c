// Gloo's rendezvous::Store over a KvStore: how a ring's ranks swap their
// addresses through the daemon (or, in tests, an in-process store).
//
// Gloo's Store reports errors by exception, so this is where our Status
// turns into one: every failed call throws gloo::IoException carrying the
// KvStore's status, worded like Gloo's own store timeouts when it was
// DEADLINE_EXCEEDED ("Wait timeout: ..."), so the connect failure that
// follows is recognised as a timeout (IsGlooTimeoutMessage). The status
// itself stays readable through failure().
//
// Used by one thread at a time (the one connecting a ring).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker_runtime/kv_client/kv_store.h"

namespace horovodd::internal {

class GlooKvStore final : public gloo::rendezvous::Store {
 public:
  // `store` must outlive this. `timeout` bounds get() and a wait() that
  // names no timeout of its own.
  GlooKvStore(KvStore& store, absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key like wait() does. A key an earlier wait() or get()
  // already read is answered from memory: Gloo waits for all its peers' keys
  // at once and then gets them one by one, and those gets would otherwise be
  // one round trip per peer, one after the other.
  std::vector<char> get(const std::string& key) override;
  // One KvStore::Get for all keys not read yet; keeps their values for get().
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first status a call threw for; OK before any.
  const absl::Status& failure() const { return failure_; }
  // True once the store answered ABORTED: its generation is over.
  bool superseded() const { return superseded_; }

 private:
  void Read(const std::vector<std::string>& keys, absl::Duration timeout);
  [[noreturn]] void Throw(const absl::Status& status);

  KvStore& store_;
  const absl::Duration timeout_;
  absl::Status failure_;
  bool superseded_ = false;
  // Values already read. A key is written once, before anyone reads it, so
  // a value read stays current for the life of this store (one ring's
  // bootstrap).
  std::map<std::string, std::vector<char>> read_;
};

}  // namespace horovodd::internal
