// The daemon's small HTTP/1.1 server: GET /metrics (metrics/metrics_http.h)
// and the status page (status_page/) each run one on their own address. One
// request per connection: the handler's answer is sent (whole, or streamed
// as server-sent events are) and the connection is closed.
//
// Threading: an accepting thread, and one thread per open connection, which
// reads the request, runs the handler (which may block: a job's status is
// asked of its loop) and writes the answer. Handlers are called from several
// threads at once.
//
// Bounded so a client cannot exhaust the daemon: at most max_connections
// are open (later clients wait in the kernel's backlog), request heads past
// kMaxRequestBytes get 431 and bodies past kMaxBodyBytes 413, a request not
// complete within kConnectionTimeout is dropped, and so is a client that
// takes no byte of the answer for that long. Stopping (the destructor) ends
// every wait at once, streams included.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/config/auth_settings.h"
#include "daemon/http/http_message.h"

namespace horovodd::daemon {

class TlsServerContext;

struct HttpServerOptions {
  // "host:port", "[::1]:port"; port 0 picks a free one.
  std::string listen;
  // What is served, for messages: "metrics" gives "cannot serve metrics on ...".
  std::string name = "HTTP";
  // TLS when tls.enabled(): the certificate and key, and with client_ca_file
  // mutual TLS (the daemon's `tls` settings, as the gRPC listener has them).
  TlsSettings tls;
  size_t max_connections = 32;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxBodyBytes = 64 * 1024;
  static constexpr absl::Duration kConnectionTimeout = absl::Seconds(10);

  // Listens and serves. INVALID_ARGUMENT for a malformed address or unusable
  // TLS files (naming the setting), UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           Handler handler);
  // Stops accepting, ends every connection's waits and joins its thread.
  ~HttpServer();

  // host:port actually bound, e.g. "127.0.0.1:39521".
  const std::string& address() const { return address_; }
  // "https://ADDRESS" under TLS, else "http://ADDRESS".
  std::string url() const;

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};  // its thread has nothing left to do
  };

  HttpServer(HttpServerOptions options, Handler handler);
  void Accept();
  // Reads one request from `fd`, answers it, closes it; then marks `self` done.
  void Serve(UniqueFd fd, std::string peer, Connection* self);
  // Joins the threads of finished connections; how many are still open.
  size_t ReapFinished() ABSL_LOCKS_EXCLUDED(mu_);

  const HttpServerOptions options_;
  const Handler handler_;
  std::string address_;
  std::unique_ptr<TlsServerContext> tls_;  // null for plain HTTP
  UniqueFd listener_;
  // Readable once the server stops: every wait of every thread watches it.
  UniqueFd stop_read_;
  UniqueFd stop_write_;
  std::thread acceptor_;
  absl::Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
