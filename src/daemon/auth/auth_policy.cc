#include "daemon/auth/auth_policy.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/status_macros.h"
#include "daemon/auth/auth_token.h"

namespace horovodd::daemon {
namespace {

constexpr absl::string_view kBearer = "Bearer ";
constexpr char kTokenHint[] =
    "pass --token-file FILE, or set HOROVODD_TOKEN or HOROVODD_TOKEN_FILE";

}  // namespace

absl::StatusOr<std::unique_ptr<AccessPolicy>> AccessPolicy::Create(const AuthSettings& settings,
                                                                   const std::string& state_dir) {
  std::unique_ptr<AccessPolicy> policy(new AccessPolicy());
  policy->open_read_only_ = settings.open_read_only;
  if (!settings.admin_token_file.empty()) {
    HVDD_ASSIGN_OR_RETURN(policy->admin_token_,
                          ReadPrivateTokenFile(settings.admin_token_file, "auth.admin_token_file"));
    policy->admin_token_path_ = settings.admin_token_file;
  } else if (!state_dir.empty()) {
    const std::string path = (std::filesystem::path(state_dir) / "admin.token").string();
    HVDD_ASSIGN_OR_RETURN(policy->admin_token_, LoadOrCreateTokenFile(path));
    policy->admin_token_path_ = path;
  } else {
    HVDD_ASSIGN_OR_RETURN(auto token, GenerateToken());
    policy->admin_token_ = std::move(token);
  }
  if (!settings.viewer_token_file.empty()) {
    HVDD_ASSIGN_OR_RETURN(auto token,
                          ReadPrivateTokenFile(settings.viewer_token_file, "auth.viewer_token_file"));
    policy->viewer_token_ = std::move(token);
  } else if (state_dir.empty()) {
    HVDD_ASSIGN_OR_RETURN(auto token, GenerateToken());
    policy->viewer_token_ = std::move(token);
  }
  return policy;
}

Caller CallerOf(const grpc::ServerContextBase& context) {
  Caller caller{context.peer(), std::nullopt};
  const auto& metadata = context.client_metadata();
  if (auto header = metadata.find("authorization"); header != metadata.end()) {
    caller.authorization = std::string(header->second.data(), header->second.size());
  }
  return caller;
}

bool AccessPolicy::IsReadOnlyOpenTo(absl::string_view peer) const {
  switch (open_read_only_) {
    case ReadOnlyAccess::kAll:
      return true;
    case ReadOnlyAccess::kLoopback:
      // A remote worker's tunnel arrives from loopback too; its host is not ours.
      return IsLoopbackPeer(peer) && !IsTunnelPeer(peer);
    case ReadOnlyAccess::kTokenRequired:
      break;
  }
  return false;
}

AccessPolicy::Presented AccessPolicy::Identify(
    const std::optional<std::string>& authorization) const {
  if (!authorization) return Presented::kNone;
  const absl::string_view value = *authorization;
  if (!absl::StartsWith(value, kBearer) || value.size() == kBearer.size()) {
    return Presented::kMalformed;
  }
  const absl::string_view token = value.substr(kBearer.size());
  // Every comparison runs, so the time taken says nothing about which matched.
  const bool admin = TokensMatch(token, admin_token_);
  const bool viewer = TokensMatch(token, viewer_token_);
  if (admin) return Presented::kAdmin;
  if (viewer) return Presented::kViewer;
  if (is_worker_token_ && is_worker_token_(token)) return Presented::kWorker;
  return Presented::kUnknown;
}

std::optional<Access> AccessPolicy::Grants(const Caller& caller) const {
  const Presented presented = Identify(caller.authorization);
  if (presented == Presented::kAdmin) return Access::kAdmin;
  if (presented == Presented::kViewer || IsReadOnlyOpenTo(caller.peer)) return Access::kRead;
  return std::nullopt;
}

absl::StatusOr<Access> AccessPolicy::CheckToken(const Caller& caller, absl::string_view method) {
  switch (Identify(caller.authorization)) {
    case Presented::kAdmin:
      return Access::kAdmin;
    case Presented::kViewer:
      return Access::kRead;
    case Presented::kNone:
      return Refuse(caller.peer, method, absl::StatusCode::kUnauthenticated, "missing_token",
                    absl::StrCat("the daemon requires a token: ", kTokenHint));
    case Presented::kMalformed:
      return Refuse(caller.peer, method, absl::StatusCode::kUnauthenticated, "malformed_token",
                    "the authorization header is not 'Bearer TOKEN'");
    case Presented::kWorker:
      return Refuse(caller.peer, method, absl::StatusCode::kPermissionDenied,
                    "worker_token_on_job_service",
                    absl::StrCat("a worker token cannot call JobService (", method, ")"));
    case Presented::kUnknown:
      break;
  }
  return Refuse(caller.peer, method, absl::StatusCode::kUnauthenticated, "wrong_token",
                absl::StrCat("the daemon does not know this token: ", kTokenHint));
}

absl::Status AccessPolicy::Authorize(const Caller& caller, absl::string_view method,
                                     Access needed) {
  if (needed == Access::kRead && IsReadOnlyOpenTo(caller.peer)) return absl::OkStatus();
  absl::StatusOr<Access> granted = CheckToken(caller, method);
  if (!granted.ok()) return granted.status();
  if (needed == Access::kAdmin && *granted != Access::kAdmin) {
    return Refuse(
        caller.peer, method, absl::StatusCode::kPermissionDenied, "viewer_token_on_admin_call",
        absl::StrCat("the viewer token may only read; ", method, " needs the admin token"));
  }
  return absl::OkStatus();
}

absl::Status AccessPolicy::AuthorizeWorker(const grpc::ServerContextBase& context,
                                           absl::string_view method, absl::string_view job_id,
                                           absl::string_view presented,
                                           absl::string_view expected) {
  if (TokensMatch(presented, expected)) return absl::OkStatus();
  if (presented.empty()) {
    return Refuse(context.peer(), method, absl::StatusCode::kUnauthenticated,
                  "missing_worker_token",
                  absl::StrCat("no worker token for job ", job_id,
                               " (workers get theirs in HOROVODD_WORKER_TOKEN)"));
  }
  if (is_worker_token_ && is_worker_token_(presented)) {
    return Refuse(context.peer(), method, absl::StatusCode::kPermissionDenied,
                  "worker_token_of_other_job",
                  absl::StrCat("this worker token belongs to another job, not ", job_id));
  }
  return Refuse(context.peer(), method, absl::StatusCode::kUnauthenticated, "wrong_worker_token",
                absl::StrCat("wrong worker token for job ", job_id));
}

absl::Status AccessPolicy::Refuse(absl::string_view peer, absl::string_view method,
                                  absl::StatusCode code, const std::string& reason,
                                  const std::string& message) {
  {
    absl::MutexLock lock(&mu_);
    ++failures_[reason];
  }
  if (std::optional<uint64_t> left_out = refusal_log_.Admit(reason, absl::Now())) {
    HVDD_LOG(WARNING) << "refused " << method << " from " << peer << ": " << reason
                      << (*left_out == 0
                              ? std::string()
                              : absl::StrCat(" (and ", *left_out,
                                             " more refused for it since the last such line)"));
  }
  return absl::Status(code, message);
}

std::string AccessPolicy::RenderMetrics() const {
  std::string out =
      "# HELP horovodd_auth_failures_total Calls refused for their credentials, by reason.\n"
      "# TYPE horovodd_auth_failures_total counter\n";
  absl::MutexLock lock(&mu_);
  for (const auto& [reason, count] : failures_) {
    absl::StrAppend(&out, "horovodd_auth_failures_total{reason=\"", reason, "\"} ", count, "\n");
  }
  return out;
}

}  // namespace horovodd::daemon
