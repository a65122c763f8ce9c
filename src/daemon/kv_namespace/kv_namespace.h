// A job's key-value namespace for ring bootstrap (Gloo's store, NCCL's unique
// id), one space per generation. Keys of a superseded generation are gone and
// its waiters are answered ABORTED: nothing from an older generation is ever
// merged into a newer one. Not thread-safe: owned by the job driver's loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

// What one job may keep here (config keys limits.max_kv_*). Past them Set and
// Get answer RESOURCE_EXHAUSTED naming the key, so a job's workers cannot
// make the daemon hold more than about max_bytes plus its waiters.
struct KvLimits {
  size_t max_key_bytes = 1024;
  size_t max_value_bytes = 4 << 20;
  // Over all generations held: a worker may write ahead to a generation not
  // planned yet, so a per-generation count alone would not bound memory.
  size_t max_keys = 100000;
  size_t max_bytes = 256 << 20;  // keys plus values
  size_t max_waiters = 8192;     // Get calls waiting for keys
};

class KvNamespace {
 public:
  using Reply = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  explicit KvNamespace(KvLimits limits = {}) : limits_(limits) {}
  ~KvNamespace();  // answers every waiter ABORTED

  absl::Status Set(int64_t generation, const std::string& key, std::string value);
  // Replies (maybe at once, maybe later from Set/AdvanceTo/ExpireWaiters) with
  // the values of all `keys`, once all exist.
  void Get(int64_t generation, std::vector<std::string> keys, absl::Time deadline, Reply reply);
  // Keys and bytes (keys plus values) held, over every generation.
  size_t key_count() const { return key_count_; }
  size_t byte_count() const { return byte_count_; }
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
    size_t first_missing = 0;  // keys before it exist
  };
  using SpaceKey = std::pair<int64_t, std::string>;  // generation, key
  // Answers `waiter` if all its keys exist (true); else moves first_missing
  // to the first that does not.
  bool TryAnswer(Waiter& waiter);
  // Files waiter `id` (not answered) under its first missing key.
  void Block(int64_t id);
  // Drops waiter `id` from every index; returns it for its reply.
  Waiter Unblock(int64_t id);
  absl::Status CheckGeneration(int64_t generation) const;
  absl::Status CheckKey(const std::string& key) const;
  // Room for `key` = `value` in `space`, replacing what the key holds there.
  absl::Status CheckRoom(const std::map<std::string, std::string>& space, const std::string& key,
                         const std::string& value) const;

  const KvLimits limits_;
  int64_t min_generation_ = 0;
  std::map<int64_t, std::map<std::string, std::string>> spaces_;
  // Waiting Gets by id, each filed under the first of its keys that does not
  // exist yet and under its deadline, so a Set looks only at the reads it may
  // complete (a ring bootstrap of N workers costs O(N log N), not O(N^2)).
  std::map<int64_t, Waiter> waiters_;
  std::map<SpaceKey, std::vector<int64_t>> blocked_on_;
  std::set<std::pair<absl::Time, int64_t>> deadlines_;
  int64_t next_waiter_id_ = 1;
  size_t key_count_ = 0;   // over spaces_
  size_t byte_count_ = 0;  // keys plus values, over spaces_
};

}  // namespace horovodd::daemon
