// A job's key-value namespace for ring bootstrap (Gloo's store, NCCL's unique
// id), one space per generation. Keys of a superseded generation are gone and
// its waiters are answered ABORTED: nothing from an older generation is ever
// merged into a newer one. Not thread-safe: owned by the job driver's loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

struct KvLimits {
  size_t max_key_bytes = 1024;
  size_t max_value_bytes = 4 << 20;
  size_t max_keys_per_generation = 100000;
};

class KvNamespace {
 public:
  using Reply = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  explicit KvNamespace(KvLimits limits = {}) : limits_(limits) {}
  ~KvNamespace();  // answers every waiter ABORTED

  absl::Status Set(int64_t generation, const std::string& key, std::string value);
  // Replies (maybe at once, maybe later from Set/AdvanceTo/ExpireWaiters) with
  // the values of all `keys`, once all exist.
  void Get(int64_t generation, std::vector<std::string> keys, absl::Time deadline,
           Reply reply);
  // Generations below `generation` are superseded: data dropped, waiters
  // answered ABORTED.
  void AdvanceTo(int64_t generation);
  // Answers waiters whose deadline passed with DEADLINE_EXCEEDED; returns the
  // earliest remaining deadline (InfiniteFuture if none).
  absl::Time ExpireWaiters(absl::Time now);
  absl::Time NextDeadline() const;

 private:
  struct Waiter {
    int64_t generation;
    std::vector<std::string> keys;
    absl::Time deadline;
    Reply reply;
  };
  bool TryAnswer(Waiter& waiter);
  absl::Status CheckGeneration(int64_t generation) const;

  const KvLimits limits_;
  int64_t min_generation_ = 0;
  std::map<int64_t, std::map<std::string, std::string>> spaces_;
  std::vector<Waiter> waiters_;
};

}  // namespace horovodd::daemon
