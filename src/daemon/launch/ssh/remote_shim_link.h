// The daemon's way to a horovodd-shim on another host (launch/shim_client/
// shim_launcher.h): one SSH session per job per host. The shim runs detached
// from every SSH session (it forks and setsids itself, its stdio is
// /dev/null and its log), with its unix socket in a per-user dir on the host
// (~/.horovodd/<daemon>/shims/<job>.<host>.sock), so neither the session's end nor
// the daemon's death reaches it. The daemon reaches that socket through a
// direct-streamlocal channel of the session (OpenSSH's
// AllowStreamLocalForwarding, on by default) and sees it as an ordinary
// stream socket: fd() speaks the shim protocol as a local shim's socket does.
//
// The link also carries the workers' way back to a daemon that listens on
// loopback (daemon_tunnel.h): one remote port forward per link, shared by
// the job's workers on that host. A restarted daemon asks for the same port
// again (OpenTunnel with the port its workers were given), so workers that
// lost their connection dial the same address and find the new daemon.
//
// Threads: Open on the caller's thread (blocking session); from then on one
// thread of the link's own drives the session, the channel, the tunnel and
// fd()'s other end. OpenTunnel may be called from any thread: it is done by
// that thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/launch/ssh/daemon_tunnel.h"
#include "daemon/launch/ssh/ssh_options.h"
#include "daemon/launch/ssh/ssh_session.h"

namespace horovodd::daemon {

// Where a job's shim lives on a remote host and how it is started there.
struct RemoteShimPlace {
  std::string host;
  SshOptions ssh;
  std::string job_id;
  // Names this daemon (its state dir) among the daemons that share the
  // host's user: the shims' dir on the host is ~/.horovodd/<namespace>/shims.
  std::string shim_namespace;
  std::string shim_binary;                     // the horovodd-shim on that host
  std::vector<std::string> shim_flags;         // --idle-timeout-s N, --buffered-lines N
  absl::Duration timeout = absl::Seconds(20);  // per step: connect, start, open
};

class RemoteShimLink {
 public:
  // Connects to the host and opens a channel to the job's shim; with
  // `start`, starts the shim first where none listens. NOT_FOUND: no shim
  // listens (and `start` was false); UNAVAILABLE, UNAUTHENTICATED,
  // PERMISSION_DENIED as SshSession::Connect; FAILED_PRECONDITION: the shim
  // did not start (its log's last line is quoted). Errors name the host.
  static absl::StatusOr<std::unique_ptr<RemoteShimLink>> Open(const RemoteShimPlace& place,
                                                              bool start);
  // Stops the link's thread, then closes the tunnel, the channel and the
  // session: the shim sees its daemon leave and keeps its workers.
  ~RemoteShimLink();
  RemoteShimLink(const RemoteShimLink&) = delete;
  RemoteShimLink& operator=(const RemoteShimLink&) = delete;

  // The daemon's end of the shim's socket; it reads end-of-file once the
  // shim or the SSH connection is gone.
  int fd() const { return daemon_end_.get(); }

  // Opens the remote port forward back to `daemon` on the host's 127.0.0.1,
  // on `port_on_host` (0: the host's sshd picks one). Returns the address a
  // worker on the host dials. Once per link; UNAVAILABLE, naming the host
  // and the port, when sshd refuses (the port is taken, or forwarding is off);
  // ABORTED once the SSH connection is gone.
  absl::StatusOr<std::string> OpenTunnel(const LoopbackAddress& daemon, int port_on_host);

  const std::string& host() const { return host_; }

 private:
  RemoteShimLink(std::unique_ptr<SshSession> session, ssh_channel channel, UniqueFd daemon_end,
                 UniqueFd link_end, UniqueFd wake);
  void Run();  // the link's thread
  // Moves bytes on both ways without blocking; false once either side ended.
  bool Relay();
  void RunRequests();
  void Wake();

  const std::string host_;
  const std::unique_ptr<SshSession> session_;
  ssh_channel channel_;  // the thread's once it runs; freed as it ends
  const UniqueFd daemon_end_;
  const UniqueFd link_end_;  // the thread's
  const UniqueFd wake_;      // eventfd

  absl::Mutex mu_;
  std::deque<std::function<void()>> requests_ ABSL_GUARDED_BY(mu_);  // run by the thread
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // the thread left its loop

  // The thread's alone.
  ssh_event event_ = nullptr;
  std::unique_ptr<DaemonTunnel> tunnel_;
  std::string to_shim_;    // from the daemon, for the channel
  std::string to_daemon_;  // from the channel, for link_end_
  bool daemon_eof_ = false;

  std::thread thread_;
};

}  // namespace horovodd::daemon
