// The status page: what an operator looks at in a browser. A page of its own
// files (assets/, built into the binary: nothing is fetched from elsewhere),
// a JSON API and a live feed of server-sent events, over the daemon's jobs
// (PageJobs), under the daemon's access rules (AccessPolicy). Routes and
// who may take them: page_routes.h; the feed: page_stream.h.
//
// StatusPage answers requests; StatusPageServer serves it on its own
// address (DaemonServer starts one when status_page_listen is set).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/auth_settings.h"
#include "daemon/http/http_message.h"
#include "daemon/http/http_server.h"
#include "daemon/status_page/page_jobs.h"
#include "daemon/status_page/page_routes.h"
#include "daemon/status_page/page_stream.h"

namespace horovodd::daemon {

class JobManager;

class StatusPage {
 public:
  // `jobs` and `access` outlive the page.
  StatusPage(PageJobs* jobs, AccessPolicy* access, StreamTimings timings = {});

  // The answer to one request; from any thread (HttpServer's handler).
  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpResponse Answer(const HttpRequest& request, const PageRoute& route);
  HttpResponse Stream(const HttpRequest& request);

  PageJobs* const jobs_;
  AccessPolicy* const access_;
  const StreamTimings timings_;
};

struct StatusPageOptions {
  // host:port (port 0 picks a free one).
  std::string listen;
  // The daemon's TLS settings: the page speaks TLS when they are set
  // (mutual TLS with client_ca_file), as the gRPC listener does, and
  // refuses plaintext beyond loopback unless allow_insecure.
  TlsSettings tls;
  StreamTimings timings;
};

// The page over a JobManager, on its own listener.
class StatusPageServer {
 public:
  // `jobs` and `access` outlive the server. INVALID_ARGUMENT for a bad
  // address, unusable TLS files or plaintext beyond loopback without
  // tls.allow_insecure; UNAVAILABLE when it cannot listen.
  static absl::StatusOr<std::unique_ptr<StatusPageServer>> Start(const StatusPageOptions& options,
                                                                 JobManager* jobs,
                                                                 AccessPolicy* access);

  // host:port bound, and the page's URL ("http://127.0.0.1:PORT/").
  const std::string& address() const { return http_->address(); }
  std::string url() const { return http_->url() + "/"; }
  // The page's URL with `token` after '#', which the page takes as its
  // login: what horovodrun prints for its embedded daemon.
  std::string LoginUrl(absl::string_view token) const;

 private:
  StatusPageServer() = default;

  std::unique_ptr<PageJobs> jobs_;
  std::unique_ptr<StatusPage> page_;
  std::unique_ptr<HttpServer> http_;  // last: it stops (its streams end) first
};

}  // namespace horovodd::daemon
