// Starting workers on a host, wherever that host is. The job driver sees only
// this interface. HostRouter sends each launch by its job's route: hosts that
// name this machine to the local launcher (fork/exec, or through
// horovodd-shim: launch/shim_client/shim_launcher.h) and every other host to
// the remote launcher (SSH exec channels, or with shims the same ShimLauncher,
// over a shim on that host), unless the job chose otherwise (every worker
// forked here, or every worker an srun step of a Slurm allocation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/launch/process_types.h"

namespace horovodd::daemon {

// The variable of a worker's environment that names the daemon it dials
// (host:port). The job driver sets it; the SSH launcher may point it at the
// worker's end of a tunnel instead (daemon_tunnel.h).
inline constexpr char kDaemonAddressVariable[] = "HOROVODD_DAEMON_ADDR";

// Which launcher a job's workers go to (horovodrun --launcher).
enum class LaunchRoute {
  kByHost,  // this machine's hosts forked here, the others over SSH (--launcher ssh)
  kLocal,   // every worker forked here, whatever its host is called (--launcher local)
  kSlurm,   // each an srun step of the job's allocation on node `host` (--launcher slurm)
};

// A job's settings for the launcher its route leads to, which only that
// launcher reads: SshOptions (launch/ssh/ssh_options.h) for the remote hosts
// of kByHost, SlurmStepOptions (launch/slurm/slurm_launcher.h) for kSlurm.
class RouteOptions {
 public:
  virtual ~RouteOptions() = default;
};

// Where a job's workers go. Made once from the job's spec
// (job/launch_options.h); the job driver and the router pass it on untouched.
struct JobRoute {
  LaunchRoute kind = LaunchRoute::kByHost;
  std::shared_ptr<const RouteOptions> options;  // null: the launcher's defaults

  // The options if they are a T (the reading launcher's own type), else null.
  template <typename T>
  const T* options_as() const {
    return dynamic_cast<const T*>(options.get());
  }
};

struct WorkerLaunch {
  std::string host;
  LaunchSpec spec;
  JobRoute route;
};

// True when `launch` starts a process on this machine (route kLocal, or
// kByHost to a host that names it): nothing on another machine is waited for.
bool LaunchesHere(const WorkerLaunch& launch);

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
  // SIGTERM to every process started so far, SIGKILL to those still running
  // after `grace`; returns once their on_exit ran (or, where the processes
  // live on other machines, after a bounded wait). Not from a callback.
  virtual void TerminateAll(absl::Duration grace) = 0;
  // Where the processes can outlive this launcher (under horovodd-shim):
  // leaves every one of them running for the next daemon, runs no callback
  // afterwards, and returns true. Elsewhere returns false and changes
  // nothing: the processes end with the launcher, TerminateAll stops them.
  virtual bool DetachAll() = 0;
  // Processes started (or taken back) whose on_exit has not returned yet.
  virtual size_t running() const = 0;
};

// True for names of this machine: localhost, 127.0.0.1, ::1, its host name.
bool IsLocalHost(const std::string& host);

class HostRouter final : public Launcher {
 public:
  // `local` takes this machine's hosts and every launch routed kLocal (its
  // handles must be positive: LocalLauncher's pids, ShimLauncher's);
  // `remote` the other hosts, `slurm` the launches routed kSlurm. `remote`
  // and `slurm` may be null (then such launches are refused with a clear
  // error), and one launcher may take two parts. All outlive the router.
  HostRouter(Launcher* local, Launcher* remote, Launcher* slurm = nullptr);

  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  absl::Status Signal(int64_t handle, int sig) override;
  // Each of its launchers in turn, the Slurm launcher first (its srun
  // processes are another launcher's children).
  void TerminateAll(absl::Duration grace) override;
  // True when every one of its launchers detached.
  bool DetachAll() override;
  // The sum of its launchers' counts (a Slurm step may count with its srun).
  size_t running() const override;

 private:
  Launcher* const local_;
  Launcher* const remote_;
  Launcher* const slurm_;
  // Each launcher once, in the order they are stopped.
  const std::vector<Launcher*> launchers_;
  // Our handles: local ones are the local launcher's (positive); the others
  // are mapped to their launcher and its handle.
  absl::Mutex mu_;
  std::map<int64_t, std::pair<Launcher*, int64_t>> remote_handles_ ABSL_GUARDED_BY(mu_);
  int64_t next_remote_handle_ ABSL_GUARDED_BY(mu_) = -1;  // negative: never collides with a pid
};

}  // namespace horovodd::daemon
