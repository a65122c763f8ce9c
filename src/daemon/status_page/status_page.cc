#include "daemon/status_page/status_page.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/json_text.h"
#include "common/loopback.h"
#include "daemon/status_page/page_assets.h"
#include "daemon/status_page/page_json.h"

namespace horovodd::daemon {
namespace {

int HttpCodeOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

HttpResponse Json(int code, std::string json) {
  HttpResponse response = TextResponse(code, std::move(json));
  response.content_type = "application/json";
  response.headers.push_back({"Cache-Control", "no-store"});
  return response;
}

HttpResponse Error(const absl::Status& status) {
  return Json(HttpCodeOf(status.code()), ErrorJson(status.message()));
}

HttpResponse Asset(const std::string& name) {
  const PageAsset* asset = FindPageAsset(name);
  if (asset == nullptr) return TextResponse(404, absl::StrCat("no ", name, "\n"));
  HttpResponse response = TextResponse(200, std::string(asset->content));
  response.content_type = ContentTypeOf(name);
  // Everything the page runs comes from here: no inline script, no other origin.
  response.headers = {
      {"Cache-Control", "no-cache"},
      {"Content-Security-Policy",
       "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
  };
  return response;
}

std::string JobIdsJson(const std::vector<std::string>& ids) {
  std::vector<std::string> quoted;
  for (const std::string& id : ids) quoted.push_back(JsonQuote(id));
  return absl::StrCat("{\"job_ids\":[", absl::StrJoin(quoted, ","), "]}");
}

}  // namespace

StatusPage::StatusPage(PageJobs* jobs, AccessPolicy* access, StreamTimings timings)
    : jobs_(jobs), access_(access), timings_(timings) {}

HttpResponse StatusPage::Handle(const HttpRequest& request) {
  absl::StatusOr<PageRoute> route = ResolvePageRoute(request.method, request.path);
  if (!route.ok()) {
    if (route.status().code() == absl::StatusCode::kNotFound) {
      return TextResponse(404, absl::StrCat(route.status().message(), "\n"));
    }
    return TextResponse(405, absl::StrCat(route.status().message(), "\n"));
  }
  if (route->access) {
    const Caller caller = CallerOfRequest(request);
    const std::string what = absl::StrCat("status page ", route->name);
    // Logging in asks whether a token is known, which open reads do not say.
    absl::Status allowed = route->action == PageAction::kSession && caller.authorization
                               ? access_->CheckToken(caller, what).status()
                               : access_->Authorize(caller, what, *route->access);
    if (!allowed.ok()) return Error(allowed);
    if (!caller.authorization && !HostIsAnAddress(request)) {
      return Json(403, ErrorJson("reading without a token needs the daemon named by its address "
                                 "(a DNS name could be another site's, rebound to it)"));
    }
  }
  return Answer(request, *route);
}

HttpResponse StatusPage::Answer(const HttpRequest& request, const PageRoute& route) {
  switch (route.action) {
    case PageAction::kAsset:
      return Asset(route.asset);
    case PageAction::kSession:
      return Json(200, SessionJson(access_->Grants(CallerOfRequest(request)) == Access::kAdmin,
                                   absl::Now()));
    case PageAction::kListJobs:
      return Json(200, JobsJson(jobs_->List()));
    case PageAction::kGetJob: {
      absl::StatusOr<v1::JobStatus> status = jobs_->Get(route.job_id);
      return status.ok() ? Json(200, JobJson(*status)) : Error(status.status());
    }
    case PageAction::kStream:
      return Stream(request);
    case PageAction::kCancelJob: {
      absl::Status cancelled = jobs_->Cancel(
          route.job_id, absl::StrCat("cancelled from the status page by ", request.peer));
      return cancelled.ok() ? Json(200, "{\"cancelled\":true}") : Error(cancelled);
    }
    case PageAction::kDrainHost:
    case PageAction::kUndrainHost: {
      absl::StatusOr<std::vector<std::string>> ids = jobs_->SetDrained(
          route.host, request.Query("job"), route.action == PageAction::kDrainHost);
      return ids.ok() ? Json(200, JobIdsJson(*ids)) : Error(ids.status());
    }
  }
  return TextResponse(500, "unknown route\n");
}

HttpResponse StatusPage::Stream(const HttpRequest& request) {
  StreamRequest wanted;
  wanted.job_id = request.Query("job");
  wanted.admin = access_->Grants(CallerOfRequest(request)) == Access::kAdmin;
  // A browser reopening the stream says which event it saw last.
  uint64_t last_seen = 0;
  if (std::optional<std::string> id = request.Header("last-event-id");
      id && absl::SimpleAtoi(*id, &last_seen)) {
    wanted.from_seq = last_seen + 1;
  }
  HttpResponse response;
  response.content_type = "text/event-stream";
  response.headers = {{"Cache-Control", "no-store"}, {"X-Accel-Buffering", "no"}};
  response.stream = [this, wanted](HttpStream& out) {
    RunPageStream(*jobs_, wanted, timings_, out);
  };
  return response;
}

std::string StatusPageServer::LoginUrl(absl::string_view token) const {
  // After '#': the browser keeps it to itself (no request, log or Referer has it).
  return absl::StrCat(url(), "#token=", PercentEncode(token));
}

absl::StatusOr<std::unique_ptr<StatusPageServer>> StatusPageServer::Start(
    const StatusPageOptions& options, JobManager* jobs, AccessPolicy* access) {
  absl::StatusOr<HostPort> address = ParseHostPort(options.listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("status page address ", address.status().message()));
  }
  // Tokens travel in its requests, as on the gRPC listener.
  if (!options.tls.enabled() && !options.tls.allow_insecure && !IsLoopbackHost(address->host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "status_page_listen ", options.listen,
        " is beyond loopback without TLS: tokens would cross the network in the clear (set "
        "tls.cert_file and tls.key_file, or tls.allow_insecure)"));
  }
  std::unique_ptr<StatusPageServer> server(new StatusPageServer());
  server->jobs_ = PageJobsOf(jobs);
  server->page_ = std::make_unique<StatusPage>(server->jobs_.get(), access, options.timings);
  HttpServerOptions http;
  http.listen = options.listen;
  http.name = "the status page";
  http.tls = options.tls;
  absl::StatusOr<std::unique_ptr<HttpServer>> started = HttpServer::Start(
      std::move(http),
      [page = server->page_.get()](const HttpRequest& request) { return page->Handle(request); });
  if (!started.ok()) return started.status();
  server->http_ = std::move(*started);
  return server;
}

}  // namespace horovodd::daemon
