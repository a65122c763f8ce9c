#include "daemon/http/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "daemon/http/http_connection.h"

namespace horovodd::daemon {
namespace {

// "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000", as gRPC names its peers.
std::string PeerName(const sockaddr_storage& address, socklen_t size) {
  char host[NI_MAXHOST] = {0};
  char port[NI_MAXSERV] = {0};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), size, host, sizeof(host), port,
                  sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "unknown";
  }
  return address.ss_family == AF_INET6 ? absl::StrCat("ipv6:[", host, "]:", port)
                                       : absl::StrCat("ipv4:", host, ":", port);
}

// What a streamed answer writes to: the connection, until it fails once.
class ConnectionStream final : public HttpStream {
 public:
  explicit ConnectionStream(HttpConnection& connection) : connection_(connection) {}
  bool Write(absl::string_view bytes) override {
    ok_ = ok_ && connection_.WriteAll(bytes, HttpServer::kConnectionTimeout);
    return ok_;
  }
  bool Wait(absl::Duration timeout) override {
    ok_ = ok_ && connection_.WaitIdle(timeout);
    return ok_;
  }

 private:
  HttpConnection& connection_;
  bool ok_ = true;
};

// Reads one request from `connection` (head, then a body of Content-Length
// bytes) by `deadline`; nullopt when there is nothing to answer (the client
// left or was too slow), else the request or the error response to send.
struct Received {
  std::optional<HttpRequest> request;
  std::optional<HttpResponse> refusal;
};

Received Receive(HttpConnection& connection, absl::Time deadline) {
  Received received;
  std::string data;
  size_t head_end = std::string::npos;
  while (true) {
    head_end = data.find("\r\n\r\n");
    if (head_end != std::string::npos && head_end + 4 <= HttpServer::kMaxRequestBytes) break;
    if (data.size() > HttpServer::kMaxRequestBytes) {
      received.refusal = TextResponse(
          431, absl::StrCat("request head over ", HttpServer::kMaxRequestBytes, " bytes\n"));
      return received;
    }
    absl::StatusOr<size_t> n = connection.Read(data, 4096, deadline);
    if (!n.ok() || *n == 0) return received;
  }
  absl::StatusOr<HttpRequest> request =
      ParseRequestHead(absl::string_view(data).substr(0, head_end));
  if (!request.ok()) {
    received.refusal = TextResponse(400, absl::StrCat(request.status().message(), "\n"));
    return received;
  }
  if (request->Header("transfer-encoding")) {
    received.refusal = TextResponse(501, "bodies must come with a Content-Length\n");
    return received;
  }
  size_t length = 0;
  if (std::optional<std::string> header = request->Header("content-length")) {
    if (!absl::SimpleAtoi(*header, &length)) {
      received.refusal = TextResponse(400, "malformed Content-Length\n");
      return received;
    }
    if (length > HttpServer::kMaxBodyBytes) {
      received.refusal = TextResponse(
          413, absl::StrCat("request body over ", HttpServer::kMaxBodyBytes, " bytes\n"));
      return received;
    }
  }
  const size_t body_start = head_end + 4;
  while (data.size() < body_start + length) {
    absl::StatusOr<size_t> n = connection.Read(data, body_start + length - data.size(), deadline);
    if (!n.ok() || *n == 0) return received;
  }
  request->body = data.substr(body_start, length);
  received.request = std::move(*request);
  return received;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Handler handler) {
  absl::StatusOr<HostPort> address = ParseHostPort(options.listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, " address ", address.status().message()));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), std::move(handler)));
  const HttpServerOptions& o = server->options_;
  if (o.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<TlsServerContext>> tls = TlsServerContext::Create(o.tls);
    if (!tls.ok()) return tls.status();
    server->tls_ = std::move(*tls);
  }
  const std::string host = address->BareHost(), port = std::to_string(address->port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.name, " address '", o.listen, "': ", gai_strerror(rc)));
  }
  int error = 0;
  for (addrinfo* a = found; a != nullptr && !server->listener_.valid(); a = a->ai_next) {
    UniqueFd fd(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      error = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 64) != 0) {
      error = errno;
      continue;
    }
    server->listener_ = std::move(fd);
  }
  freeaddrinfo(found);
  if (!server->listener_.valid()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve ", o.name, " on ", o.listen, ": ", std::strerror(error)));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(server->listener_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_size);
  char bound_host[NI_MAXHOST] = {0};
  char bound_port[NI_MAXSERV] = {0};
  getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_size, bound_host, sizeof(bound_host),
              bound_port, sizeof(bound_port), NI_NUMERICHOST | NI_NUMERICSERV);
  server->address_ = bound.ss_family == AF_INET6 ? absl::StrCat("[", bound_host, "]:", bound_port)
                                                 : absl::StrCat(bound_host, ":", bound_port);

  int stop[2];
  if (pipe2(stop, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat(o.name, " server: pipe: ", std::strerror(errno)));
  }
  server->stop_read_.Reset(stop[0]);
  server->stop_write_.Reset(stop[1]);
  server->acceptor_ = std::thread([s = server.get()] { s->Accept(); });
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() {
  if (!acceptor_.joinable()) return;  // Start failed before serving
  // The pipe stays readable from here on, for every thread's every wait.
  const char byte = 0;
  while (write(stop_write_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  acceptor_.join();
  std::list<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
}

std::string HttpServer::url() const {
  return absl::StrCat(tls_ ? "https://" : "http://", address_);
}

size_t HttpServer::ReapFinished() {
  std::list<Connection> finished;
  size_t open = 0;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (it->done.load()) finished.splice(finished.end(), connections_, it);
      it = next;
    }
    open = connections_.size();
  }
  for (Connection& connection : finished) connection.thread.join();
  return open;
}

void HttpServer::Accept() {
  // Writes under TLS go through write(2), which raises SIGPIPE when the
  // client has gone. Blocked here, and so in every connection thread started
  // from here, it stays pending on the thread and ends with it; the write
  // fails with EPIPE instead.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  while (true) {
    const bool room = ReapFinished() < options_.max_connections;
    // Past the connection limit new clients wait in the kernel's backlog;
    // look again shortly for a connection that ended.
    pollfd fds[2] = {{stop_read_.get(), POLLIN, 0}, {room ? listener_.get() : -1, POLLIN, 0}};
    if (poll(fds, 2, room ? 1000 : 50) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (!(fds[1].revents & POLLIN)) continue;
    sockaddr_storage from{};
    socklen_t from_size = sizeof(from);
    UniqueFd client(accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &from_size,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client.valid()) continue;
    std::string peer = PeerName(from, from_size);
    absl::MutexLock lock(&mu_);
    Connection& connection = connections_.emplace_back();
    connection.thread = std::thread(
        [this, fd = std::move(client), peer = std::move(peer), self = &connection]() mutable {
          Serve(std::move(fd), std::move(peer), self);
        });
  }
}

void HttpServer::Serve(UniqueFd fd, std::string peer, Connection* self) {
  {
    HttpConnection connection(std::move(fd), stop_read_.get(), tls_.get());
    const absl::Time deadline = absl::Now() + kConnectionTimeout;
    if (connection.Handshake(deadline).ok()) {
      Received received = Receive(connection, deadline);
      if (received.request) {
        received.request->peer = std::move(peer);
        received.request->tls = tls_ != nullptr;
        const bool head_only = received.request->method == "HEAD";
        HttpResponse response = handler_(*received.request);
        if (response.stream && !head_only) {
          if (connection.WriteAll(FormatResponseHead(response, std::nullopt), kConnectionTimeout)) {
            ConnectionStream stream(connection);
            response.stream(stream);
          }
        } else {
          connection.WriteAll(
              FormatResponseHead(response, response.body.size()) + (head_only ? "" : response.body),
              kConnectionTimeout);
        }
      } else if (received.refusal) {
        if (connection.WriteAll(
                FormatResponseHead(*received.refusal, received.refusal->body.size()) +
                    received.refusal->body,
                kConnectionTimeout)) {
          connection.DrainBeforeClose(absl::Seconds(1));
        }
      }
    }
  }
  self->done.store(true);
}

}  // namespace horovodd::daemon
