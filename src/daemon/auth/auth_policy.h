// Who may call what on horovodd's gRPC listener and its status page (the
// page's HTTP requests are checked by the same rules, as a Caller).
// JobService calls carry an `authorization: Bearer TOKEN` header: the admin
// token opens every call, the viewer token (or the open_read_only setting)
// the read-only ones.
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
#include <optional>
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

// Who is calling, whatever the transport: a gRPC call (CallerOf) or a
// request to the status page.
struct Caller {
  // As gRPC writes peers: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000".
  std::string peer;
  // The `authorization` value presented ("Bearer TOKEN"); nullopt: none.
  std::optional<std::string> authorization;
};

// The caller of a gRPC call: its peer and its `authorization` metadata.
Caller CallerOf(const grpc::ServerContextBase& context);

class AccessPolicy {
 public:
  // Reads the token files of `settings`. Without an admin token file, the
  // admin token is <state_dir>/admin.token (made on first start, mode 0600,
  // and logged by path), or one kept in memory when state_dir is empty.
  // Without a viewer token file and without a state dir (the daemon
  // embedded in horovodrun) the viewer token is one kept in memory too:
  // horovodrun's link to the status page carries it.
  static absl::StatusOr<std::unique_ptr<AccessPolicy>> Create(const AuthSettings& settings,
                                                              const std::string& state_dir);

  // Tells worker tokens apart from unknown ones (JobManager::IsWorkerToken);
  // set once, before serving.
  void set_worker_token_check(std::function<bool(absl::string_view)> check) {
    is_worker_token_ = std::move(check);
  }

  // For a JobService call named `method` ("SubmitJob").
  absl::Status Authorize(const grpc::ServerContextBase& context, absl::string_view method,
                         Access needed) {
    return Authorize(CallerOf(context), method, needed);
  }
  // The same for any caller; `method` names what was asked in the log.
  absl::Status Authorize(const Caller& caller, absl::string_view method, Access needed);
  // What `caller` may do, by the rules of Authorize but neither counted nor
  // logged: kAdmin, kRead, or nullopt for nothing. (So a page can show the
  // actions a caller has; each action is still authorized on its own.)
  std::optional<Access> Grants(const Caller& caller) const;
  // What the token `caller` presents opens, whatever open_read_only says
  // (the status page's login): kAdmin or kRead; refusals as Authorize's,
  // counted and logged.
  absl::StatusOr<Access> CheckToken(const Caller& caller, absl::string_view method);
  // For a WorkerService call: `presented` (WorkerIdentity.token) must be the
  // worker token of `job_id`, which is `expected`.
  absl::Status AuthorizeWorker(const grpc::ServerContextBase& context, absl::string_view method,
                               absl::string_view job_id, absl::string_view presented,
                               absl::string_view expected);

  // The admin token, for the embedded daemon's own horovodrun.
  const std::string& admin_token() const { return admin_token_; }
  // The viewer token; empty when there is none.
  const std::string& viewer_token() const { return viewer_token_; }
  // Where the admin token is kept; empty when it is only in memory.
  const std::string& admin_token_path() const { return admin_token_path_; }

  // horovodd_auth_failures_total by reason, in the Prometheus text format.
  std::string RenderMetrics() const;

 private:
  // Which token an `authorization` value holds.
  enum class Presented { kNone, kMalformed, kAdmin, kViewer, kWorker, kUnknown };

  AccessPolicy() = default;
  Presented Identify(const std::optional<std::string>& authorization) const;
  absl::Status Refuse(absl::string_view peer, absl::string_view method, absl::StatusCode code,
                      const std::string& reason, const std::string& message);
  bool IsReadOnlyOpenTo(absl::string_view peer) const;

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
