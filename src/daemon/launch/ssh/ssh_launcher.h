// Runs workers on remote hosts through libssh exec channels (no ssh binary),
// with one SSH session per process, and watches all of them from ONE I/O
// thread (an ssh_event over every session's socket).
//
// Launch() connects, checks the host key, logs in and starts the command on
// the calling thread, and returns once the remote shell reported the process's
// pid; then the session is handed to the I/O thread, which alone touches it
// from there on (libssh sessions are not thread-safe). Output lines and the
// exit status come back through ProcessCallbacks exactly as from the local
// launcher, on the I/O thread, on_exit once, after all output.
//
// The remote process runs in a process group of its own (see
// RemoteLaunchCommand). Signal() runs `kill -SIG -PGID` on the host through a
// second channel of the process's session. When the process exits, what is
// left of its group is killed once its output stops (output_linger). If the
// session breaks, or a SIGKILL is not confirmed within kill_timeout (the host
// went silent), on_exit runs with an unknown exit status and a last stderr
// line says why.
//
// A launch whose HOROVODD_DAEMON_ADDR is a loopback address (a daemon the
// host cannot dial) gets a DaemonTunnel on its session: the worker is told
// the host-side end of it instead (daemon_tunnel.h).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/launch/launcher.h"
#include "daemon/launch/ssh/ssh_options.h"

struct ssh_event_struct;

namespace horovodd::daemon {

struct SshLauncherOptions {
  // Per step of connecting: TCP connect, key exchange, login.
  absl::Duration connect_timeout = absl::Seconds(10);
  // How long the remote shell may take to report the process's pid.
  absl::Duration start_timeout = absl::Seconds(30);
  // After the process exited, output of what it left behind is still taken
  // for this long; then the rest of its process group is killed.
  absl::Duration output_linger = absl::Seconds(2);
  // A SIGKILL the host does not confirm (by the process ending) within this
  // long means the host is gone: the process is given up on.
  absl::Duration kill_timeout = absl::Seconds(5);
};

class SshLauncher final : public Launcher {
 public:
  static absl::StatusOr<std::unique_ptr<SshLauncher>> Create(
      const SshLauncherOptions& options = {});
  // SIGKILL to every remote process still running, waits until each one's
  // on_exit ran (bounded by kill_timeout), joins the I/O thread. Not from
  // inside a callback.
  ~SshLauncher() override;
  SshLauncher(const SshLauncher&) = delete;
  SshLauncher& operator=(const SshLauncher&) = delete;

  // Starts launch.spec on launch.host as the route's SshOptions say. Returns the remote
  // pid once the process started; on failure no callback is called. Errors
  // name the host: UNAVAILABLE (unreachable, or the connection broke),
  // UNAUTHENTICATED (login refused), PERMISSION_DENIED (host key refused),
  // INVALID_ARGUMENT (a spec that cannot be sent), FAILED_PRECONDITION (the
  // remote shell could not start it, e.g. no such working directory),
  // DEADLINE_EXCEEDED (no pid within start_timeout). Blocks the calling
  // thread meanwhile; may be called from any thread but the I/O thread.
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  // Queues `sig` for the remote process group and returns; NOT_FOUND once the
  // process's on_exit began.
  absl::Status Signal(int64_t handle, int sig) override;

  // SIGTERM to every process started so far, SIGKILL to those still running
  // after `grace`; returns when all of them finished. Not from a callback.
  void TerminateAll(absl::Duration grace) override;

  // False: a remote process's group is killed when its session ends.
  bool DetachAll() override { return false; }

  // Processes whose on_exit has not returned yet.
  size_t running() const override;

 private:
  struct Process;

  SshLauncher(const SshLauncherOptions& options, UniqueFd wake_fd, ssh_event_struct* event);

  // Everything below runs on the I/O thread.
  void Loop();
  void AdoptNewProcesses();
  void DeliverSignals();
  // Moves one process on: its kill channels, its linger and kill deadlines.
  // False once it is over (then Finish it).
  bool Advance(Process& process, absl::Time now);
  void SendSignal(Process& process, int sig, absl::Time now);
  void Finish(int64_t handle);
  int MillisUntilNextDeadline(absl::Time now) const;

  void Wake();
  void QueueSignalLocked(int64_t handle, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when all of `handles` finished before `deadline`.
  bool AwaitFinished(const std::set<int64_t>& handles, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SshLauncherOptions options_;
  const UniqueFd wake_fd_;  // eventfd: new processes, signals, or quit

  mutable absl::Mutex mu_;
  int64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::set<int64_t> unfinished_ ABSL_GUARDED_BY(mu_);  // handles whose on_exit has not returned
  std::set<int64_t> signalable_ ABSL_GUARDED_BY(mu_);  // handles whose on_exit has not begun
  // Started by Launch, not yet taken over by the I/O thread.
  std::deque<std::unique_ptr<Process>> adopt_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, int>> signals_ ABSL_GUARDED_BY(mu_);  // handle, signal
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // destructor started: start nothing new
  bool quit_ ABSL_GUARDED_BY(mu_) = false;      // the I/O thread leaves its loop

  // Owned by the I/O thread; no lock.
  ssh_event_struct* const event_;
  std::map<int64_t, std::unique_ptr<Process>> processes_;

  std::thread io_thread_;
};

}  // namespace horovodd::daemon
