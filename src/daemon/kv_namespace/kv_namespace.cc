#include "daemon/kv_namespace/kv_namespace.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

KvNamespace::~KvNamespace() {
  for (auto& [id, w] : waiters_) w.reply(absl::AbortedError("job ended"));
}

absl::Status KvNamespace::CheckGeneration(int64_t generation) const {
  if (generation < min_generation_) {
    return absl::AbortedError(
        absl::StrCat("generation ", generation, " was superseded by generation ", min_generation_));
  }
  return absl::OkStatus();
}

absl::Status KvNamespace::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("key is empty");
  if (key.size() > limits_.max_key_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("key of ", key.size(), " bytes is over the limit of ", limits_.max_key_bytes,
                     " bytes (limits.max_kv_key_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status KvNamespace::CheckRoom(const std::map<std::string, std::string>& space,
                                    const std::string& key, const std::string& value) const {
  if (value.size() > limits_.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value of key '", key, "' is ", value.size(), " bytes; the limit is ",
                     limits_.max_value_bytes, " bytes (limits.max_kv_value_bytes)"));
  }
  auto old = space.find(key);
  const size_t freed = old == space.end() ? 0 : key.size() + old->second.size();
  if (old == space.end() && key_count_ >= limits_.max_keys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this job already holds ", key_count_, " keys, the limit ",
                     "(limits.max_kv_keys_per_job); cannot add '", key, "'"));
  }
  if (byte_count_ - freed + key.size() + value.size() > limits_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this job's keys and values would take more than ", limits_.max_bytes,
                     " bytes (limits.max_kv_bytes_per_job); cannot set '", key, "'"));
  }
  return absl::OkStatus();
}

absl::Status KvNamespace::Set(int64_t generation, const std::string& key, std::string value) {
  if (auto st = CheckGeneration(generation); !st.ok()) return st;
  if (auto st = CheckKey(key); !st.ok()) return st;
  auto space_it = spaces_.find(generation);
  static const std::map<std::string, std::string> kEmpty;
  if (auto st = CheckRoom(space_it == spaces_.end() ? kEmpty : space_it->second, key, value);
      !st.ok()) {
    return st;
  }
  auto& space = spaces_[generation];
  auto [it, added] = space.try_emplace(key);
  if (added) {
    ++key_count_;
    byte_count_ += key.size();
  }
  byte_count_ = byte_count_ - it->second.size() + value.size();
  it->second = std::move(value);
  // Only the reads waiting for this very key may be complete now.
  auto blocked = blocked_on_.find(SpaceKey(generation, key));
  if (blocked == blocked_on_.end()) return absl::OkStatus();
  std::vector<int64_t> ids = std::move(blocked->second);
  blocked_on_.erase(blocked);
  for (int64_t id : ids) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;
    if (TryAnswer(w->second)) {
      deadlines_.erase({w->second.deadline, id});
      waiters_.erase(w);
    } else {
      Block(id);
    }
  }
  return absl::OkStatus();
}

bool KvNamespace::TryAnswer(Waiter& waiter) {
  auto it = spaces_.find(waiter.generation);
  for (; waiter.first_missing < waiter.keys.size(); ++waiter.first_missing) {
    if (it == spaces_.end() || it->second.count(waiter.keys[waiter.first_missing]) == 0) {
      return false;
    }
  }
  std::vector<std::string> values;
  values.reserve(waiter.keys.size());
  for (const auto& key : waiter.keys) values.push_back(it->second.at(key));
  waiter.reply(std::move(values));
  return true;
}

void KvNamespace::Block(int64_t id) {
  const Waiter& w = waiters_.at(id);
  blocked_on_[SpaceKey(w.generation, w.keys[w.first_missing])].push_back(id);
}

KvNamespace::Waiter KvNamespace::Unblock(int64_t id) {
  auto it = waiters_.find(id);
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  deadlines_.erase({w.deadline, id});
  auto blocked = blocked_on_.find(SpaceKey(w.generation, w.keys[w.first_missing]));
  if (blocked != blocked_on_.end()) {
    std::vector<int64_t>& ids = blocked->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) blocked_on_.erase(blocked);
  }
  return w;
}

void KvNamespace::Get(int64_t generation, std::vector<std::string> keys, absl::Time deadline,
                      Reply reply) {
  if (auto st = CheckGeneration(generation); !st.ok()) {
    reply(st);
    return;
  }
  for (const auto& key : keys) {
    if (auto st = CheckKey(key); !st.ok()) {
      reply(st);
      return;
    }
  }
  // More keys than a job may hold can never all exist.
  if (keys.size() > limits_.max_keys) {
    reply(absl::ResourceExhaustedError(absl::StrCat("asked for ", keys.size(),
                                                    " keys; a job holds at most ", limits_.max_keys,
                                                    " (limits.max_kv_keys_per_job)")));
    return;
  }
  Waiter waiter{generation, std::move(keys), deadline, std::move(reply)};
  if (TryAnswer(waiter)) return;
  if (waiters_.size() >= limits_.max_waiters) {
    waiter.reply(absl::ResourceExhaustedError(
        absl::StrCat("this job already has ", waiters_.size(),
                     " key-value reads waiting, the limit (limits.max_kv_waiters_per_job)")));
    return;
  }
  const int64_t id = next_waiter_id_++;
  deadlines_.insert({waiter.deadline, id});
  waiters_.emplace(id, std::move(waiter));
  Block(id);
}

void KvNamespace::AdvanceTo(int64_t generation) {
  if (generation <= min_generation_) return;
  min_generation_ = generation;
  const auto superseded_end = spaces_.lower_bound(generation);
  for (auto it = spaces_.begin(); it != superseded_end; ++it) {
    for (const auto& [key, value] : it->second) {
      --key_count_;
      byte_count_ -= key.size() + value.size();
    }
  }
  spaces_.erase(spaces_.begin(), superseded_end);
  std::vector<int64_t> superseded;
  for (const auto& [id, w] : waiters_) {
    if (w.generation < generation) superseded.push_back(id);
  }
  for (int64_t id : superseded) {
    Waiter w = Unblock(id);
    w.reply(CheckGeneration(w.generation));
  }
}

absl::Time KvNamespace::ExpireWaiters(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    Waiter w = Unblock(deadlines_.begin()->second);
    w.reply(absl::DeadlineExceededError(absl::StrCat("keys not set in time in generation ",
                                                     w.generation, " (first missing: '",
                                                     w.keys[w.first_missing], "')")));
  }
  return NextDeadline();
}

absl::Time KvNamespace::NextDeadline() const {
  return deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
}

}  // namespace horovodd::daemon
