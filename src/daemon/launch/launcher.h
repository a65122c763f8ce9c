// Starting workers on a host, wherever that host is. The job driver sees only
// this interface: HostRouter sends hosts that name this machine to the local
// Starting workers on a host, wherever that host is. The job driver sees only
// this interface: HostRouter sends hosts that name this machine to the local
// launcher (fork/exec, or through horovodd-shim: launch/shim_client/shim_launcher.h)
// and every other host to the remote launcher (SSH exec channels, or with
// shims the same ShimLauncher, over a shim on that host), unless the job chose
// otherwise (LaunchRoute: every worker forked here, or every worker an srun
// step of a Slurm allocation).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/launch/process_types.h"

namespace horovodd::daemon {

class LocalLauncher;

// How to reach a remote host (horovodrun's --ssh-* flags).
struct SshOptions {
  int port = 22;
  std::string user;               // empty: the daemon's user
  std::string identity_file;      // empty: libssh's defaults (~/.ssh/id_*)
  std::string known_hosts_file;   // empty: ~/.ssh/known_hosts
  enum class HostKeyChecking { kStrict, kAcceptNew, kOff };
  HostKeyChecking host_key_checking = HostKeyChecking::kAcceptNew;
};

// The variable of a worker's environment that names the daemon it dials
// (host:port). The job driver sets it; the SSH launcher may point it at the
// worker's end of a tunnel instead (daemon_tunnel.h).
inline constexpr char kDaemonAddressVariable[] = "HOROVODD_DAEMON_ADDR";

// Which launcher a worker goes to (horovodrun --launcher).
enum class LaunchRoute {
  kByHost,  // this machine's hosts forked here, the others over SSH (--launcher ssh)
  kLocal,   // every worker forked here, whatever its host is called (--launcher local)
  kSlurm,   // an srun step of slurm_job_id on node `host` (--launcher slurm)
};

struct WorkerLaunch {
  std::string host;
  LaunchSpec spec;
  SshOptions ssh;  // used for remote hosts only
  LaunchRoute route = LaunchRoute::kByHost;
  std::string slurm_job_id;  // kSlurm only
};

struct LaunchedProcess {
  int64_t handle = 0;  // names the process in Signal; never 0
  int pid = 0;         // its pid on its host, for people (0 if unknown)
};

// A worker that a supervisor (horovodd-shim) still held when a restarted
// daemon found it again (ShimLauncher::Reattach).
struct ReattachedWorker {
  int64_t worker_id = 0;  // the id the job driver gave it
  LaunchedProcess process;
  bool exited = false;  // its on_exit follows its buffered output
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts the process; callbacks as ProcessCallbacks documents. Errors name
  // the host and what failed (exec error, unreachable host, refused key...).
  virtual absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                                 ProcessCallbacks callbacks) = 0;
  // Sends `sig` to the process (and what it started). NOT_FOUND once it ended.
  virtual absl::Status Signal(int64_t handle, int sig) = 0;
};

// True for names of this machine: localhost, 127.0.0.1, ::1, its host name.
bool IsLocalHost(const std::string& host);

// LocalLauncher as a Launcher: the handle is the pid.
class LocalProcessLauncher final : public Launcher {
 public:
  explicit LocalProcessLauncher(LocalLauncher* local) : local_(local) {}
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  absl::Status Signal(int64_t handle, int sig) override;

 private:
  LocalLauncher* const local_;
};

class HostRouter final : public Launcher {
 public:
  // `local` must outlive the router; `remote` and `slurm` may be null (then
  // remote hosts, or Slurm steps, are refused with a clear error).
  HostRouter(LocalLauncher* local, Launcher* remote, Launcher* slurm = nullptr)
      : owned_local_(std::make_unique<LocalProcessLauncher>(local)),
        local_(owned_local_.get()),
        remote_(remote),
        slurm_(slurm) {}
  // The same with any launcher for this machine's hosts (its handles must be
  // positive, e.g. ShimLauncher's).
  HostRouter(Launcher* local, Launcher* remote, Launcher* slurm = nullptr)
      : local_(local), remote_(remote), slurm_(slurm) {}

  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  absl::Status Signal(int64_t handle, int sig) override;

 private:
  const std::unique_ptr<LocalProcessLauncher> owned_local_;
  Launcher* const local_;
  Launcher* const remote_;
  Launcher* const slurm_;
  // Our handles: local ones are the local launcher's (positive); the others
  // are mapped to their launcher and its handle.
  absl::Mutex mu_;
  std::map<int64_t, std::pair<Launcher*, int64_t>> remote_handles_ ABSL_GUARDED_BY(mu_);
  int64_t next_remote_handle_ ABSL_GUARDED_BY(mu_) = -1;  // negative: never collides with a pid
};

}  // namespace horovodd::daemon
