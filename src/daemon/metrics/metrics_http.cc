#include "daemon/metrics/metrics_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"

namespace horovodd::daemon {
namespace {

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body, bool include_body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      include_body ? body : "");
}

std::string TextResponse(int code, const char* reason, const std::string& body) {
  return Response(code, reason, "text/plain; charset=utf-8", body, true);
}

// The answer to one complete request head ("GET /metrics HTTP/1.1\r\n...").
std::string Answer(const std::string& head, const MetricsHttpServer::Render& render) {
  const std::string line = head.substr(0, head.find("\r\n"));
  const auto first_space = line.find(' ');
  const auto second_space = line.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos ||
      line.compare(second_space + 1, 5, "HTTP/") != 0) {
    return TextResponse(400, "Bad Request", "malformed request line\n");
  }
  const std::string method = line.substr(0, first_space);
  std::string target = line.substr(first_space + 1, second_space - first_space - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") return TextResponse(404, "Not Found", "only /metrics is served here\n");
  if (method != "GET" && method != "HEAD") {
    return TextResponse(405, "Method Not Allowed", "/metrics answers GET and HEAD\n");
  }
  return Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render(), method == "GET");
}

struct Connection {
  UniqueFd fd;
  std::string request;   // bytes read so far, until the head is complete
  std::string response;  // set once answered
  size_t sent = 0;
  absl::Time deadline;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, Render render) {
  absl::StatusOr<HostPort> address = ParseHostPort(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address ", address.status().message()));
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
        absl::StrCat("metrics address '", listen, "': ", gai_strerror(rc)));
  }
  UniqueFd listener;
  int error = 0;
  for (addrinfo* a = found; a != nullptr && !listener.valid(); a = a->ai_next) {
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
    listener = std::move(fd);
  }
  freeaddrinfo(found);
  if (!listener.valid()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", std::strerror(error)));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_size);
  char bound_host[NI_MAXHOST] = {0};
  char bound_port[NI_MAXSERV] = {0};
  getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_size, bound_host, sizeof(bound_host),
              bound_port, sizeof(bound_port), NI_NUMERICHOST | NI_NUMERICSERV);
  const std::string shown_host =
      bound.ss_family == AF_INET6 ? absl::StrCat("[", bound_host, "]") : bound_host;

  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("metrics server: pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(listener), UniqueFd(wake[0]), UniqueFd(wake[1]),
                            std::move(render), absl::StrCat(shown_host, ":", bound_port)));
}

MetricsHttpServer::MetricsHttpServer(UniqueFd listener, UniqueFd wake_read, UniqueFd wake_write,
                                     Render render, std::string address)
    : render_(std::move(render)),
      address_(std::move(address)),
      listener_(std::move(listener)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)) {
  thread_ = std::thread([this] { Run(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const char byte = 0;
  while (write(wake_write_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void MetricsHttpServer::Run() {
  std::list<Connection> connections;  // owned by this thread
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;  // the connection behind fds[2 + i]
  while (true) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    // Past the connection limit new clients wait in the kernel's backlog.
    const bool accepting = connections.size() < kMaxConnections;
    fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
    for (Connection& c : connections) {
      fds.push_back({c.fd.get(), static_cast<short>(c.response.empty() ? POLLIN : POLLOUT), 0});
      polled.push_back(&c);
    }
    // Wake at least once a second to close connections past their deadline.
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;

    if (fds[1].revents & POLLIN) {
      UniqueFd client(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (client.valid()) {
        connections.push_back(
            Connection{std::move(client), "", "", 0, absl::Now() + kConnectionTimeout});
      }
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      const short revents = fds[2 + i].revents;
      if (revents & (POLLERR | POLLNVAL)) {
        c.fd.Reset();
        continue;
      }
      if (c.response.empty() && (revents & (POLLIN | POLLHUP))) {
        char buffer[4096];
        const ssize_t n = recv(c.fd.get(), buffer, sizeof(buffer), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.fd.Reset();  // the client left before asking
          continue;
        }
        if (n > 0) c.request.append(buffer, n);
        const auto head_end = c.request.find("\r\n\r\n");
        if (head_end != std::string::npos && head_end + 4 <= kMaxRequestBytes) {
          c.response = Answer(c.request.substr(0, head_end + 2), render_);
        } else if (c.request.size() > kMaxRequestBytes) {
          c.response =
              TextResponse(431, "Request Header Fields Too Large",
                           absl::StrCat("request head over ", kMaxRequestBytes, " bytes\n"));
        }
      } else if (!c.response.empty() && (revents & (POLLOUT | POLLHUP))) {
        const ssize_t n =
            send(c.fd.get(), c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) c.sent += n;
        if ((n < 0 && errno != EAGAIN && errno != EINTR) || c.sent == c.response.size()) {
          c.fd.Reset();
        }
      }
    }
    const absl::Time now = absl::Now();
    connections.remove_if([now](const Connection& c) { return !c.fd.valid() || now > c.deadline; });
  }
}

}  // namespace horovodd::daemon
