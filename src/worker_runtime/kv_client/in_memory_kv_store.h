// A KvStore in this process's memory: a map under a mutex, waits on a
// condition. What tests use instead of the daemon, and what ranks running as
// threads of one process can share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker_runtime/kv_client/kv_store.h"

namespace horovodd::internal {

// Thread-safe. Counts the calls it serves, so tests can check how many round
// trips a protocol over it takes.
class InMemoryKvStore final : public KvStore {
 public:
  absl::Status Set(const std::string& key, std::string value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  // Ends the namespace, like the daemon superseding a generation: waits
  // blocked now and every later call fail with `reason` (ABORTED).
  void Abort(const std::string& reason);

  int sets() const;
  int gets() const;  // Get and Wait calls

 private:
  bool AllSetLocked(const std::vector<std::string>& keys) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `keys` (or the abort); the status the call returns.
  absl::Status AwaitLocked(const std::vector<std::string>& keys, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);  // OK until Abort()
  int sets_ ABSL_GUARDED_BY(mu_) = 0;
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace horovodd::internal
