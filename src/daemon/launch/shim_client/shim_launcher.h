// A Launcher that starts this machine's workers through horovodd-shim
// (daemon/shim_server/shim_server.h): one shim per job, started detached, so
// the workers are not the daemon's children and a daemon that dies or
// restarts leaves them running. Output lines, exit statuses and signals pass through
// the shim's unix socket (<socket_dir>/<job id>.sock); a restarted daemon
// finds the shim there again (Reattach) and gets what happened meanwhile.
//
// The guarantees are LocalLauncher's: callbacks as ProcessCallbacks says
// (lines before the one on_exit), signals reach the worker's process group,
// and nothing is orphaned: a worker dies with its shim (the shim's parent-
// death signal), and a shim ends once its workers are gone and their exit
// statuses were handed over (or after its idle timeout with no daemon).
//
// Remote hosts (a kByHost launch whose host is not this machine) get a shim
// of their own per job, started and reached over SSH (launch/ssh/
// remote_shim_link.h: detached from the session, its socket under
// ~/.horovodd/<namespace>/shims on that host). The workers' way back to a
// daemon on loopback is that link's port forward; a restarted daemon opens
// it again on the port the shim's Welcome names (the one its workers were
// given), so they reconnect to the same address.
//
// Workers are named the way the job driver names them in their environment
// (HOROVODD_JOB_ID, HOROVODD_WORKER_ID), so a restarted daemon finds each by
// the ids it journaled.
//
// Threads: Launch/Reattach/Signal from any thread (Launch blocks until the
// shim answered); one reader thread per shim connection runs the callbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/launch/launcher.h"
#include "daemon/launch/ssh/ssh_options.h"

namespace horovodd::shim::v1 {
class ShimEvent;
}

namespace horovodd::daemon {

struct ShimLauncherOptions {
  std::string shim_binary;  // the horovodd-shim executable
  std::string socket_dir;   // created if missing; each job's socket and log
  // A shim with no worker running and no daemon ends after this.
  absl::Duration shim_idle_timeout = absl::Minutes(10);
  // How many output lines a shim keeps for an absent daemon; 0: its default.
  int shim_buffered_lines = 0;
  // How long Launch waits for the shim's answer.
  absl::Duration launch_timeout = absl::Seconds(60);
  // The horovodd-shim on remote hosts; empty: shim_binary (the same install).
  std::string remote_shim_binary;
  // Names this daemon's shims among others of the same user on a host;
  // empty: a hash of this machine's name and socket_dir (stable across
  // restarts). Daemons that take each other's jobs over (an HA setup) share
  // one: SharedShimNamespace.
  std::string remote_namespace;
  // Per step of reaching a remote shim (connect, start, open).
  absl::Duration remote_timeout = absl::Seconds(20);
  // How long a reattach asks a host's sshd again for the workers' port while
  // it refuses: the SSH connection of a daemon that vanished without closing
  // it (its host lost, its network cut) holds the port until the host's sshd
  // drops that connection (ClientAliveInterval x ClientAliveCountMax).
  absl::Duration tunnel_reclaim_timeout = absl::Seconds(60);
};

// A remote host that held workers of a job, to find its shim again.
struct RemoteShimHost {
  std::string host;
  SshOptions ssh;  // the job's
};

// What a job's shim held when a restarted daemon found it again.
struct ShimContents {
  std::vector<ReattachedWorker> workers;  // every worker not yet released
  std::string worker_token;               // the job's, from its workers' environment
  absl::Duration daemon_away;             // how long no daemon was connected
  uint32_t protocol_version = 0;          // the oldest of the shims found
  // Shims not found, or found without their workers' way back: one line each.
  std::vector<std::string> warnings;
};

// A remote_namespace every daemon of one HA setup shares (`cluster` names
// the setup: its etcd store and prefix), so a new leader finds the shims
// the old one started on the workers' hosts.
std::string SharedShimNamespace(const std::string& cluster);

class ShimLauncher final : public Launcher {
 public:
  // INVALID_ARGUMENT when the binary is not executable or the socket dir
  // cannot be made.
  static absl::StatusOr<std::unique_ptr<ShimLauncher>> Create(ShimLauncherOptions options);
  // DetachAll(): the workers keep running under their shims.
  ~ShimLauncher() override;

  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  absl::Status Signal(int64_t handle, int sig) override;

  // Finds the shims of `job_id` again (after a daemon restart): this
  // machine's and those on `remote_hosts`, and says what they hold together.
  // `daemon_address` is where this daemon listens (for the remote workers'
  // tunnels). Nothing is read past a Welcome until Adopt: call Adopt next (or
  // DetachAll). NOT_FOUND when no shim answers for the job (they ended, or
  // died with their workers); FAILED_PRECONDITION when the only one speaks a
  // protocol this daemon does not (the message says which). A shim missing
  // beside others found is a warning: its workers count as lost.
  absl::StatusOr<ShimContents> Reattach(const std::string& job_id,
                                        const std::vector<RemoteShimHost>& remote_hosts = {},
                                        const std::string& daemon_address = "");
  // Delivers the reattached workers' output and exits from now on, each to
  // the callbacks `callbacks_for(worker_id)` returns (called here, once per
  // worker).
  void Adopt(const std::string& job_id,
             const std::function<ProcessCallbacks(int64_t)>& callbacks_for);

  // SIGTERM to every worker, SIGKILL to those left after `grace`; returns
  // once all exits were delivered (or 5 s more passed). Not from a callback.
  void TerminateAll(absl::Duration grace) override;
  // The job ended (every exit was delivered): lets its shim go, which then
  // ends. Any thread, callbacks included; does not wait.
  void Close(const std::string& job_id);
  // Closes every shim connection; no callback runs afterwards. The shims and
  // their workers run on, for the next daemon: true.
  bool DetachAll() override;

  // Where the job's shim on this machine listens.
  std::string SocketPath(const std::string& job_id) const;
  // The pid of the job's shim on this machine while connected to it, else 0.
  int ShimPid(const std::string& job_id) const;
  // The dir of this daemon's shims on remote hosts: ~/.horovodd/<this>/shims.
  const std::string& remote_namespace() const { return options_.remote_namespace; }
  // Workers started or taken back whose exit has not been delivered.
  size_t running() const override;

 private:
  struct Shim;
  // (job id, host): host "" for this machine.
  using ShimKey = std::pair<std::string, std::string>;
  explicit ShimLauncher(ShimLauncherOptions options) : options_(std::move(options)) {}
  // `launch` is the first launch on that shim (for a remote one: how to reach it).
  absl::StatusOr<std::shared_ptr<Shim>> ShimFor(const ShimKey& key, const WorkerLaunch& launch);
  absl::StatusOr<std::shared_ptr<Shim>> Connect(const std::string& job_id, bool start);
  absl::Status StartShim(const std::string& job_id);
  // shim_launcher_remote.cc: a remote shim's connection; with `start`, the
  // shim is started where none listens and the tunnel is opened for
  // `daemon_address` (when it is on loopback).
  absl::StatusOr<std::shared_ptr<Shim>> ConnectRemote(const ShimKey& key, const SshOptions& ssh,
                                                      bool start,
                                                      const std::string& daemon_address);
  // After a remote shim's Welcome: its workers' tunnel on the port they know.
  absl::Status ReopenTunnel(Shim& shim, const std::string& workers_address,
                            const std::string& daemon_address);
  // Hello sent: reads the Welcome (or the refusal).
  absl::StatusOr<horovodd::shim::v1::ShimEvent> Handshake(Shim& shim);
  absl::StatusOr<ShimContents> ReattachOne(const ShimKey& key, std::shared_ptr<Shim> shim,
                                           const std::string& daemon_address);
  std::vector<std::shared_ptr<Shim>> ShimsOf(const std::string& job_id);
  void ReadLoop(std::shared_ptr<Shim> shim);
  void DropShim(const std::shared_ptr<Shim>& shim);
  // A worker was marked exited (call with no other lock held): wakes
  // AwaitNoneRunning.
  void NoteExit() ABSL_LOCKS_EXCLUDED(exits_mu_);
  // Until no worker runs or `deadline`; whether none runs.
  bool AwaitNoneRunning(absl::Time deadline) ABSL_LOCKS_EXCLUDED(exits_mu_);

  const ShimLauncherOptions options_;
  absl::Mutex start_mu_;  // one shim start (or reattach) at a time
  mutable absl::Mutex mu_;
  std::map<ShimKey, std::shared_ptr<Shim>> shims_ ABSL_GUARDED_BY(mu_);
  // Shims whose connection ended; their reader threads are joined later.
  std::vector<std::shared_ptr<Shim>> retired_ ABSL_GUARDED_BY(mu_);
  // handle -> (shim, worker id)
  std::map<int64_t, std::pair<ShimKey, int64_t>> handles_ ABSL_GUARDED_BY(mu_);
  int64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_unnamed_worker_ ABSL_GUARDED_BY(mu_) = int64_t{1} << 40;
  // Taken before mu_ (AwaitNoneRunning counts under it), never while
  // holding mu_ or a shim's mu: an exit noted under it is never missed.
  absl::Mutex exits_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::CondVar exited_;
};

}  // namespace horovodd::daemon
