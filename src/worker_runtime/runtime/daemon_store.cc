#include "worker_runtime/runtime/daemon_store.h"

#include <utility>

#include <gloo/common/error.h>
#include <gloo/rendezvous/prefix_store.h>

#include "absl/strings/str_cat.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

DaemonStore::DaemonStore(DaemonClient& client, int64_t generation, absl::Duration timeout)
    : client_(client), generation_(generation), timeout_(timeout) {}

void DaemonStore::Throw(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kAborted) superseded_ = true;
  // Worded like Gloo's own store timeouts, so the connect failure that
  // follows is recognised as a timeout (IsGlooTimeoutMessage).
  const char* prefix =
      status.code() == absl::StatusCode::kDeadlineExceeded ? "Wait timeout: " : "";
  throw gloo::IoException(absl::StrCat(prefix, status.ToString()));
}

void DaemonStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = client_.KvSet(generation_, key, std::string(data.begin(), data.end()));
  if (!status.ok()) Throw(status);
}

std::vector<std::string> DaemonStore::Get(const std::vector<std::string>& keys,
                                          absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> values = client_.KvGet(generation_, keys, timeout);
  if (!values.ok()) Throw(values.status());
  for (size_t i = 0; i < keys.size() && i < values->size(); ++i) {
    const std::string& value = (*values)[i];
    read_[keys[i]] = std::vector<char>(value.begin(), value.end());
  }
  return *std::move(values);
}

std::vector<char> DaemonStore::get(const std::string& key) {
  auto it = read_.find(key);
  if (it != read_.end()) return it->second;
  std::vector<std::string> values = Get({key}, timeout_);
  return std::vector<char>(values.front().begin(), values.front().end());
}

void DaemonStore::wait(const std::vector<std::string>& keys) { wait(keys, gloo::kNoTimeout); }

void DaemonStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (read_.count(key) == 0) missing.push_back(key);
  }
  if (missing.empty()) return;
  // Gloo passes kNoTimeout (zero) for "no timeout of its own".
  Get(missing, timeout > std::chrono::milliseconds::zero() ? absl::FromChrono(timeout)
                                                           : timeout_);
}

RingResult ConnectRingThroughDaemon(DaemonClient& client, const RingOptions& options) {
  DaemonStore store(client, options.generation, options.timeout);
  gloo::rendezvous::PrefixStore prefixed(absl::StrCat("g", options.generation), store);
  ConnectOptions connect;
  connect.rank = options.rank;
  connect.size = options.size;
  connect.bind_address = options.bind_address;
  connect.timeout = options.timeout;
  RingResult result{ConnectGlooContext(prefixed, connect), false};
  result.superseded = !result.ring.ok() && store.superseded();
  return result;
}

}  // namespace horovodd::internal
