// Who may call what on horovodd's gRPC listener. JobService calls carry an
// `authorization: Bearer TOKEN` header: the admin token opens every call,
// the viewer token (or the open_read_only setting) the read-only ones.
// WorkerService calls carry their job's worker token in WorkerIdentity.token,
// which opens that job and no other. Health checks need nothing.
//
// Refusals are UNAUTHENTICATED (no token, a malformed header, a token the
// daemon does not know) or PERMISSION_DENIED (a known token on a call it does
// not open); each is counted by reason (horovodd_auth_failures_total) and
// logged with the method and the peer, never the token. Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/log_throttle.h"
#include "daemon/config/auth_settings.h"

namespace grpc {
class ServerContextBase;
}

namespace horovodd::daemon {

enum class Access { kRead, kAdmin };

class AccessPolicy {
 public:
  // Reads the token files of `settings`. Without an admin token file, the
  // admin token is <state_dir>/admin.token (made on first start, mode 0600,
  // and logged by path), or one kept in memory when state_dir is empty.
  static absl::StatusOr<std::unique_ptr<AccessPolicy>> Create(const AuthSettings& settings,
                                                              const std::string& state_dir);

  // Tells worker tokens apart from unknown ones (JobManager::IsWorkerToken);
  // set once, before serving.
  void set_worker_token_check(std::function<bool(absl::string_view)> check) {
    is_worker_token_ = std::move(check);
  }

  // For a JobService call named `method` ("SubmitJob").
  absl::Status Authorize(const grpc::ServerContextBase& context, absl::string_view method,
                         Access needed);
  // For a WorkerService call: `presented` (WorkerIdentity.token) must be the
  // worker token of `job_id`, which is `expected`.
  absl::Status AuthorizeWorker(const grpc::ServerContextBase& context, absl::string_view method,
                               absl::string_view job_id, absl::string_view presented,
                               absl::string_view expected);

  // The admin token, for the embedded daemon's own horovodrun.
  const std::string& admin_token() const { return admin_token_; }
  // Where the admin token is kept; empty when it is only in memory.
  const std::string& admin_token_path() const { return admin_token_path_; }

  // horovodd_auth_failures_total by reason, in the Prometheus text format.
  std::string RenderMetrics() const;

 private:
  AccessPolicy() = default;
  absl::Status Refuse(const grpc::ServerContextBase& context, absl::string_view method,
                      absl::StatusCode code, const std::string& reason, const std::string& message);
  bool IsReadOnlyOpenTo(const grpc::ServerContextBase& context) const;

  std::string admin_token_;
  std::string admin_token_path_;
  std::string viewer_token_;  // empty: none
  ReadOnlyAccess open_read_only_ = ReadOnlyAccess::kTokenRequired;
  std::function<bool(absl::string_view)> is_worker_token_;

  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> failures_ ABSL_GUARDED_BY(mu_);  // by reason
  // One log line per refusal reason and second at most; the count is exact.
  LogThrottle refusal_log_{absl::Seconds(1)};
};

}  // namespace horovodd::daemon
