// The status page's routes and who may take them: one table, read by
// StatusPage (status_page.h) before anything else looks at a request.
//
//   GET  /, /index.html, /app.js, /app.css   the page itself (no data: anyone)
//   GET  /api/session                        read   what the caller may do
//   GET  /api/jobs                           read   ListJobs, as summaries
//   GET  /api/jobs/JOB                       read   GetJob
//   GET  /api/stream[?job=JOB]               read   server-sent events: jobs, JOB's status and
//   events POST /api/jobs/JOB/cancel                admin  CancelJob POST
//   /api/hosts/HOST/drain[?job=JOB]     admin  DrainHost (every running job without job=) POST
//   /api/hosts/HOST/undrain[?job=JOB]   admin  UndrainHost
//
// "read" is the viewer token, the admin token, or auth.open_read_only's rule;
// "admin" the admin token: the rules of the gRPC API (AccessPolicy), checked
// by the server on every request whatever the page shows. The token travels
// in an `Authorization: Bearer` header, never in a cookie: browsers send a
// host's cookies to every port of it, so a cookie would reach every other
// page on the same machine (or on `localhost` through SSH forwards). The page
// keeps it in the browser tab's sessionStorage, which is its origin's alone.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/http/http_message.h"

namespace horovodd::daemon {

enum class PageAction {
  kAsset,
  kSession,
  kListJobs,
  kGetJob,
  kStream,
  kCancelJob,
  kDrainHost,
  kUndrainHost,
};

struct PageRoute {
  PageAction action;
  // What the caller's credentials must open; nullopt: nothing (the page's
  // own files).
  std::optional<Access> access;
  // "GET /api/jobs/{job}": the route as logged with a refusal.
  std::string name;
  std::string asset;   // kAsset: the file ("index.html")
  std::string job_id;  // kGetJob, kCancelJob: from the path
  std::string host;    // kDrainHost, kUndrainHost: from the path
};

// The route of `method` and `path` (percent-decoded, no query). NOT_FOUND
// for a path the page does not have; FAILED_PRECONDITION, saying which
// method it answers, for a known path asked with another method.
absl::StatusOr<PageRoute> ResolvePageRoute(absl::string_view method, absl::string_view path);

// Who sent `request`: its peer and its `Authorization` header.
Caller CallerOfRequest(const HttpRequest& request);

// Whether the request's Host header names the daemon by an IP address or
// "localhost". A read that only auth.open_read_only lets through must: a
// page of another site whose name was rebound to the daemon's address
// (DNS rebinding) would otherwise read the jobs through the browser of
// someone on the daemon's machine.
bool HostIsAnAddress(const HttpRequest& request);

}  // namespace horovodd::daemon
