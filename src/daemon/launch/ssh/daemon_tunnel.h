// The way back from a remote worker to a daemon that listens on loopback
// only (the daemon embedded in horovodrun, or horovodd on 127.0.0.1): a
// remote port forward of the worker's own SSH session. The host's sshd
// listens on the host's 127.0.0.1 (a port it picks); every connection the
// worker makes there comes back through the session, encrypted, and is
// joined here to a fresh TCP connection to the daemon. The daemon never
// listens beyond loopback, and nothing but the worker's host can use the
// tunnel.
//
// Owned by the RemoteProcess of the session: opened by the launching thread
// (blocking session), then driven by the SSH launcher's I/O thread alone,
// like the session itself.
#pragma once

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace horovodd::daemon {

// host and port of `address` ("127.0.0.1:7451", "localhost:7451",
// "[::1]:7451") when its host is a loopback one, which no other host can
// dial; nullopt for any other address.
struct LoopbackAddress {
  std::string host;  // as given, without brackets
  int port = 0;
};
std::optional<LoopbackAddress> ParseLoopbackAddress(const std::string& address);

class DaemonTunnel {
 public:
  // Asks the host behind `session` (connected, logged in, blocking) to
  // listen on its 127.0.0.1 for `daemon`, on `port_on_host` (0: its sshd
  // picks one; a restarted daemon asks for the port its workers know).
  // UNAVAILABLE, naming the host, when its sshd refuses (AllowTcpForwarding
  // no, DisableForwarding yes, the port is taken).
  static absl::StatusOr<std::unique_ptr<DaemonTunnel>> Open(ssh_session session,
                                                            const std::string& host_name,
                                                            LoopbackAddress daemon,
                                                            int port_on_host = 0);
  ~DaemonTunnel();  // closes every connection; before its session goes
  DaemonTunnel(const DaemonTunnel&) = delete;
  DaemonTunnel& operator=(const DaemonTunnel&) = delete;

  // "127.0.0.1:PORT": what the worker dials on its host.
  std::string address_on_host() const;

  // From here on, connections' sockets are polled by `event` (the I/O
  // thread's, which also polls the session).
  void Watch(ssh_event event);
  // After each poll: watches the sockets of connections the host forwarded
  // meanwhile, moves what is buffered on, drops connections both ends have
  // closed.
  void Pump();
  // Bytes wait for a socket or the SSH window: poll again soon.
  bool Backlogged() const;

 private:
  struct Connection;

  DaemonTunnel(ssh_session session, LoopbackAddress daemon, int port);
  static int OnMessage(ssh_session session, ssh_message message, void* self);
  void Accept(ssh_message message);
  void Flush(Connection& c);
  void WatchSocket(Connection& c, bool reading);

  const ssh_session session_;
  const LoopbackAddress daemon_;
  const int port_on_host_;
  ssh_event event_ = nullptr;
  int64_t next_id_ = 0;
  std::map<int64_t, std::unique_ptr<Connection>> connections_;
};

}  // namespace horovodd::daemon
