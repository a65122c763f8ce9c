#include "worker_runtime/kv_client/gloo_kv_store.h"

#include <utility>

#include <gloo/common/error.h>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace horovodd::internal {

GlooKvStore::GlooKvStore(KvStore& store, absl::Duration timeout)
    : store_(store), timeout_(timeout) {}

void GlooKvStore::Throw(const absl::Status& status) {
  if (failure_.ok()) failure_ = status;
  if (status.code() == absl::StatusCode::kAborted) superseded_ = true;
  const char* prefix = status.code() == absl::StatusCode::kDeadlineExceeded ? "Wait timeout: " : "";
  throw gloo::IoException(absl::StrCat(prefix, status.ToString()));
}

void GlooKvStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_.Set(key, std::string(data.begin(), data.end()));
  if (!status.ok()) Throw(status);
}

void GlooKvStore::Read(const std::vector<std::string>& keys, absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> values = store_.Get(keys, timeout);
  if (!values.ok()) Throw(values.status());
  HVDD_CHECK(values->size() == keys.size())
      << "KvStore::Get answered " << values->size() << " values for " << keys.size() << " keys";
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& value = (*values)[i];
    read_[keys[i]] = std::vector<char>(value.begin(), value.end());
  }
}

std::vector<char> GlooKvStore::get(const std::string& key) {
  if (read_.count(key) == 0) Read({key}, timeout_);
  return read_.at(key);
}

void GlooKvStore::wait(const std::vector<std::string>& keys) { wait(keys, gloo::kNoTimeout); }

void GlooKvStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (read_.count(key) == 0) missing.push_back(key);
  }
  if (missing.empty()) return;
  // Gloo passes kNoTimeout (zero) for "no timeout of its own".
  Read(missing, timeout > std::chrono::milliseconds::zero() ? absl::FromChrono(timeout) : timeout_);
}

}  // namespace horovodd::internal
