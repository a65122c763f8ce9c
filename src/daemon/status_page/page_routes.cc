#include "daemon/status_page/page_routes.h"

#include <arpa/inet.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace horovodd::daemon {
namespace {

struct RouteRow {
  const char* method;   // HEAD is answered wherever GET is
  const char* pattern;  // "{job}" and "{host}" stand for one path segment
  PageAction action;
  std::optional<Access> access;
  const char* asset;  // kAsset only
};

const std::vector<RouteRow>& Routes() {
  static const std::vector<RouteRow> rows = {
      {"GET", "/", PageAction::kAsset, std::nullopt, "index.html"},
      {"GET", "/index.html", PageAction::kAsset, std::nullopt, "index.html"},
      {"GET", "/app.js", PageAction::kAsset, std::nullopt, "app.js"},
      {"GET", "/app.css", PageAction::kAsset, std::nullopt, "app.css"},
      {"GET", "/api/session", PageAction::kSession, Access::kRead, ""},
      {"GET", "/api/jobs", PageAction::kListJobs, Access::kRead, ""},
      {"GET", "/api/jobs/{job}", PageAction::kGetJob, Access::kRead, ""},
      {"GET", "/api/stream", PageAction::kStream, Access::kRead, ""},
      {"POST", "/api/jobs/{job}/cancel", PageAction::kCancelJob, Access::kAdmin, ""},
      {"POST", "/api/hosts/{host}/drain", PageAction::kDrainHost, Access::kAdmin, ""},
      {"POST", "/api/hosts/{host}/undrain", PageAction::kUndrainHost, Access::kAdmin, ""},
  };
  return rows;
}

// Whether `path` fits `pattern`; fills `route`'s job_id and host.
bool Matches(absl::string_view pattern, absl::string_view path, PageRoute& route) {
  const std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  const std::vector<absl::string_view> got = absl::StrSplit(path, '/');
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{job}" || want[i] == "{host}") {
      if (got[i].empty()) return false;
      (want[i] == "{job}" ? route.job_id : route.host) = std::string(got[i]);
    } else if (want[i] != got[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<PageRoute> ResolvePageRoute(absl::string_view method, absl::string_view path) {
  const absl::string_view asked = method == "HEAD" ? "GET" : method;
  std::vector<std::string> allowed;
  for (const RouteRow& row : Routes()) {
    PageRoute route{row.action, row.access, absl::StrCat(row.method, " ", row.pattern),
                    row.asset,  "",         ""};
    if (!Matches(row.pattern, path, route)) continue;
    if (asked == row.method) return route;
    allowed.push_back(row.method);
  }
  if (allowed.empty()) {
    return absl::NotFoundError(absl::StrCat("the status page has no ", path));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(path, " answers ", absl::StrJoin(allowed, " and ")));
}

Caller CallerOfRequest(const HttpRequest& request) {
  return Caller{request.peer, request.Header("authorization")};
}

bool HostIsAnAddress(const HttpRequest& request) {
  const std::optional<std::string> header = request.Header("host");
  if (!header) return false;
  absl::string_view host = *header;
  if (absl::ConsumePrefix(&host, "[")) {
    host = host.substr(0, host.find(']'));
  } else {
    host = host.substr(0, host.find(':'));
  }
  if (host == "localhost") return true;
  const std::string text(host);
  in6_addr address{};
  return inet_pton(AF_INET, text.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, text.c_str(), &address) == 1;
}

}  // namespace horovodd::daemon
