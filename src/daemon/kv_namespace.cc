#include "daemon/kv_namespace.h"

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

KvNamespace::~KvNamespace() {
  for (auto& w : waiters_) w.reply(absl::AbortedError("job ended"));
}

absl::Status KvNamespace::CheckGeneration(int64_t generation) const {
  if (generation < min_generation_) {
    return absl::AbortedError(absl::StrCat("generation ", generation,
                                           " was superseded by generation ",
                                           min_generation_));
  }
  return absl::OkStatus();
}

absl::Status KvNamespace::Set(int64_t generation, const std::string& key,
                              std::string value) {
  if (auto st = CheckGeneration(generation); !st.ok()) return st;
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key must be 1 to ", limits_.max_key_bytes, " bytes"));
  }
  if (value.size() > limits_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "value of key '", key, "' is ", value.size(), " bytes; the limit is ",
        limits_.max_value_bytes));
  }
  auto& space = spaces_[generation];
  if (!space.count(key) && space.size() >= limits_.max_keys_per_generation) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "generation ", generation, " already holds ",
        limits_.max_keys_per_generation, " keys"));
  }
  space[key] = std::move(value);
  // Answer whoever now has everything they asked for.
  std::vector<Waiter> still_waiting;
  for (auto& w : waiters_) {
    if (w.generation == generation && TryAnswer(w)) continue;
    still_waiting.push_back(std::move(w));
  }
  waiters_.swap(still_waiting);
  return absl::OkStatus();
}

bool KvNamespace::TryAnswer(Waiter& waiter) {
  auto it = spaces_.find(waiter.generation);
  if (it == spaces_.end()) return false;
  std::vector<std::string> values;
  values.reserve(waiter.keys.size());
  for (const auto& key : waiter.keys) {
    auto kv = it->second.find(key);
    if (kv == it->second.end()) return false;
    values.push_back(kv->second);
  }
  waiter.reply(std::move(values));
  return true;
}

void KvNamespace::Get(int64_t generation, std::vector<std::string> keys,
                      absl::Time deadline, Reply reply) {
  if (auto st = CheckGeneration(generation); !st.ok()) {
    reply(st);
    return;
  }
  Waiter waiter{generation, std::move(keys), deadline, std::move(reply)};
  if (TryAnswer(waiter)) return;
  waiters_.push_back(std::move(waiter));
}

void KvNamespace::AdvanceTo(int64_t generation) {
  if (generation <= min_generation_) return;
  min_generation_ = generation;
  spaces_.erase(spaces_.begin(), spaces_.lower_bound(generation));
  std::vector<Waiter> still_waiting;
  for (auto& w : waiters_) {
    if (w.generation < generation) {
      w.reply(CheckGeneration(w.generation));
    } else {
      still_waiting.push_back(std::move(w));
    }
  }
  waiters_.swap(still_waiting);
}

absl::Time KvNamespace::ExpireWaiters(absl::Time now) {
  std::vector<Waiter> still_waiting;
  for (auto& w : waiters_) {
    if (w.deadline <= now) {
      w.reply(absl::DeadlineExceededError(absl::StrCat(
          "keys not set in time in generation ", w.generation, " (first: '",
          w.keys.empty() ? "" : w.keys.front(), "')")));
    } else {
      still_waiting.push_back(std::move(w));
    }
  }
  waiters_.swap(still_waiting);
  return NextDeadline();
}

absl::Time KvNamespace::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& w : waiters_) next = std::min(next, w.deadline);
  return next;
}

}  // namespace horovodd::daemon
