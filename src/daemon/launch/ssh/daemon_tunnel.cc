#include "daemon/launch/ssh/daemon_tunnel.h"

#include <libssh/server.h>  // ssh_set_message_callback, for a client too
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/loopback.h"

namespace horovodd::daemon {
namespace {

// Past this much waiting in one direction, that direction stops taking more
// (the socket is not read, the channel's window is not opened).
constexpr size_t kMaxBuffered = size_t{4} << 20;
constexpr size_t kReadChunk = 64 << 10;

// A connected socket to `daemon` (read and written here without blocking,
// MSG_DONTWAIT); -1 when nothing answers.
int ConnectTo(const LoopbackAddress& daemon) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(daemon.host.c_str(), std::to_string(daemon.port).c_str(), &hints, &found) != 0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {  // loopback: at once
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    // gRPC's small frames go on as they come, as on gRPC's own sockets.
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

// The local port of a connected socket; 0 if it cannot be had.
int LocalPort(int fd) {
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return 0;
  return ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

}  // namespace

std::optional<LoopbackAddress> ParseLoopbackAddress(const std::string& address) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (!parsed.ok() || parsed->port == 0 || !IsLoopbackHost(parsed->host)) return std::nullopt;
  return LoopbackAddress{parsed->BareHost(), parsed->port};
}

// One forwarded connection: an SSH channel from the worker's host joined to
// a TCP connection to the daemon. Data is buffered only while the other side
// cannot take it.
struct DaemonTunnel::Connection {
  ssh_channel channel = nullptr;
  ssh_channel_callbacks_struct callbacks = {};  // lives as long as channel
  UniqueFd socket;
  std::string to_socket;     // from the worker, for the daemon
  std::string to_channel;    // from the daemon, for the worker
  bool channel_eof = false;  // the worker's side will send no more
  bool channel_closed = false;
  bool socket_eof = false;   // the daemon's side will send no more
  bool socket_shut = false;  // the daemon was told the worker sends no more
  bool eof_sent = false;     // the worker was told the daemon sends no more
  bool reading = false;      // the socket is in the I/O thread's event
  bool broken = false;
  int local_port = 0;  // registered as a tunnel peer (loopback.h) while open

  ~Connection() {
    if (channel != nullptr) {
      // A channel freed before the host's close arrived stays with libssh,
      // which runs its callbacks when that close comes: they point here.
      ssh_remove_channel_callbacks(channel, &callbacks);
      ssh_channel_close(channel);
      ssh_channel_free(channel);
    }
    socket.Reset();  // closed before its port may pass as an ordinary local client's
    if (local_port != 0) RemoveTunnelPeerPort(local_port);
  }
  // What the worker sent is handed on even when its channel closed right after.
  bool over() const {
    return broken || (channel_closed && to_socket.empty()) ||
           (channel_eof && socket_shut && socket_eof && eof_sent);
  }
  // Into the daemon's socket, without blocking.
  void SendToSocket() {
    while (!to_socket.empty() && !broken) {
      const ssize_t n =
          send(socket.get(), to_socket.data(), to_socket.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        to_socket.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
      } else {
        broken = true;
      }
    }
    if (to_socket.empty() && channel_eof && !socket_shut && !broken) {
      shutdown(socket.get(), SHUT_WR);
      socket_shut = true;
    }
  }
  // From the daemon's socket (the poll said it is readable); only buffered
  // here: the channel is written after the poll, never from inside it.
  void ReadSocket() {
    if (to_channel.size() >= kMaxBuffered || socket_eof || broken) return;
    char buffer[kReadChunk];
    const ssize_t n = recv(socket.get(), buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      to_channel.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      socket_eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      broken = true;
    }
  }
};

absl::StatusOr<std::unique_ptr<DaemonTunnel>> DaemonTunnel::Open(ssh_session session,
                                                                 const std::string& host_name,
                                                                 LoopbackAddress daemon,
                                                                 int port_on_host) {
  int port = 0;
  const bool listening =
      ssh_channel_listen_forward(session, "127.0.0.1", port_on_host, &port) == SSH_OK;
  if (port_on_host != 0) port = port_on_host;  // sshd names only a port it picked
  if (!listening || port <= 0) {
    const std::string which =
        port_on_host == 0 ? std::string("a port") : absl::StrCat("port ", port_on_host);
    return absl::UnavailableError(
        absl::StrCat(host_name, " refused to forward ", which,
                     " back to the daemon, which listens on ", daemon.host,
                     " only (the host's sshd needs AllowTcpForwarding, and the port must be "
                     "free; or run horovodd on an address the hosts can reach): ",
                     ssh_get_error(session)));
  }
  std::unique_ptr<DaemonTunnel> tunnel(new DaemonTunnel(session, std::move(daemon), port));
  // The host's forwarded connections arrive as channel-open messages,
  // handled as the session is polled, by whichever thread polls it.
  ssh_set_message_callback(session, &DaemonTunnel::OnMessage, tunnel.get());
  return tunnel;
}

DaemonTunnel::DaemonTunnel(ssh_session session, LoopbackAddress daemon, int port)
    : session_(session), daemon_(std::move(daemon)), port_on_host_(port) {}

DaemonTunnel::~DaemonTunnel() {
  ssh_set_message_callback(session_, nullptr, nullptr);
  for (auto& [id, c] : connections_) {
    if (c->reading) ssh_event_remove_fd(event_, c->socket.get());
  }
  connections_.clear();
}

std::string DaemonTunnel::address_on_host() const {
  return absl::StrCat("127.0.0.1:", port_on_host_);
}

void DaemonTunnel::Watch(ssh_event event) { event_ = event; }

bool DaemonTunnel::Backlogged() const {
  for (const auto& [id, c] : connections_) {
    if (!c->to_socket.empty() || !c->to_channel.empty()) return true;
  }
  return false;
}

void DaemonTunnel::Pump() {
  if (event_ == nullptr) return;
  std::vector<int64_t> over;
  for (auto& [id, c] : connections_) {
    Flush(*c);
    const bool want_reading = !c->over() && !c->socket_eof && c->to_channel.size() < kMaxBuffered;
    if (want_reading != c->reading) WatchSocket(*c, want_reading);
    if (c->over()) over.push_back(id);
  }
  // Over means not reading: the loop above took their sockets out of the event.
  for (int64_t id : over) connections_.erase(id);  // closes the socket and the channel
}

int DaemonTunnel::OnMessage(ssh_session, ssh_message message, void* self) {
  if (ssh_message_type(message) != SSH_REQUEST_CHANNEL_OPEN ||
      ssh_message_subtype(message) != SSH_CHANNEL_FORWARDED_TCPIP) {
    return 1;  // libssh refuses it, as it would without this callback
  }
  static_cast<DaemonTunnel*>(self)->Accept(message);
  return 0;
}

void DaemonTunnel::Accept(ssh_message message) {
  auto c = std::make_unique<Connection>();
  c->socket.Reset(ConnectTo(daemon_));
  c->local_port = c->socket.valid() ? LocalPort(c->socket.get()) : 0;
  if (c->local_port == 0) {  // the daemon is going away
    ssh_message_reply_default(message);
    return;
  }
  // Before the first byte goes through, so that no call on it passes as local.
  AddTunnelPeerPort(c->local_port);
  c->channel = ssh_message_channel_request_open_reply_accept(message);
  if (c->channel == nullptr) return;
  ssh_callbacks_init(&c->callbacks);
  c->callbacks.userdata = c.get();
  c->callbacks.channel_data_function = [](ssh_session, ssh_channel, void* data, uint32_t len, int,
                                          void* self) -> int {
    auto* conn = static_cast<Connection*>(self);
    if (conn->to_socket.size() >= kMaxBuffered) return 0;  // left with libssh for now
    conn->to_socket.append(static_cast<const char*>(data), len);
    conn->SendToSocket();
    return static_cast<int>(len);
  };
  c->callbacks.channel_eof_function = [](ssh_session, ssh_channel, void* self) {
    static_cast<Connection*>(self)->channel_eof = true;
  };
  c->callbacks.channel_close_function = [](ssh_session, ssh_channel, void* self) {
    auto* conn = static_cast<Connection*>(self);
    conn->channel_closed = conn->channel_eof = true;
  };
  ssh_set_channel_callbacks(c->channel, &c->callbacks);
  // Its socket is polled from the next Pump on, on the I/O thread.
  connections_.emplace(next_id_++, std::move(c));
}

void DaemonTunnel::Flush(Connection& c) {
  c.SendToSocket();
  if (!c.to_channel.empty() && !c.broken && !c.channel_closed) {
    const int n = ssh_channel_write(c.channel, c.to_channel.data(),
                                    static_cast<uint32_t>(c.to_channel.size()));
    if (n == SSH_ERROR) {
      c.broken = true;
    } else if (n > 0) {
      c.to_channel.erase(0, static_cast<size_t>(n));
    }
  }
  if (c.to_channel.empty() && c.socket_eof && !c.eof_sent && !c.broken && !c.channel_closed) {
    ssh_channel_send_eof(c.channel);
    c.eof_sent = true;
  }
}

void DaemonTunnel::WatchSocket(Connection& c, bool reading) {
  if (!reading) {
    ssh_event_remove_fd(event_, c.socket.get());
    c.reading = false;
    return;
  }
  const auto on_readable = [](socket_t, int, void* self) -> int {
    static_cast<Connection*>(self)->ReadSocket();
    return 0;
  };
  c.reading = ssh_event_add_fd(event_, c.socket.get(), POLLIN, on_readable, &c) == SSH_OK;
  if (!c.reading) c.broken = true;
}

}  // namespace horovodd::daemon
