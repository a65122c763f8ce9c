#include "worker_runtime/kv_client/in_memory_kv_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::internal {

absl::Status InMemoryKvStore::Set(const std::string& key, std::string value) {
  absl::MutexLock lock(&mu_);
  ++sets_;
  if (!aborted_.ok()) return aborted_;
  values_[key] = std::move(value);
  return absl::OkStatus();
}

bool InMemoryKvStore::AllSetLocked(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (values_.count(key) == 0) return false;
  }
  return true;
}

absl::Status InMemoryKvStore::AwaitLocked(const std::vector<std::string>& keys,
                                          absl::Duration timeout) {
  ++gets_;
  auto ready = [this, &keys]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !aborted_.ok() || AllSetLocked(keys);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!aborted_.ok()) return aborted_;
  if (!AllSetLocked(keys)) {
    return absl::DeadlineExceededError(
        absl::StrCat(keys.size(), " key(s) (first '", keys.empty() ? "" : keys.front(),
                     "') did not appear within ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> InMemoryKvStore::Get(const std::vector<std::string>& keys,
                                                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  HVDD_RETURN_IF_ERROR(AwaitLocked(keys, timeout));
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(values_.at(key));
  return values;
}

absl::Status InMemoryKvStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return AwaitLocked(keys, timeout);
}

void InMemoryKvStore::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = absl::AbortedError(reason);
}

int InMemoryKvStore::sets() const {
  absl::MutexLock lock(&mu_);
  return sets_;
}

int InMemoryKvStore::gets() const {
  absl::MutexLock lock(&mu_);
  return gets_;
}

}  // namespace horovodd::internal
