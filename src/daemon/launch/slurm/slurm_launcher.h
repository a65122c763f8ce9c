// Runs workers as srun steps of the Slurm allocation the job is in, one
// single-task step per worker on its node:
//
//   srun --jobid=J --nodelist=NODE --nodes=1 --ntasks=1 --overlap
//        --cpu-bind=none --kill-on-bad-exit=0 --quiet --job-name=hvdd.PID.N CMD...
//
// srun itself runs on the daemon's machine through the launcher it is given:
// the LocalLauncher (a child of the daemon), or with a state dir the
// ShimLauncher, so that srun, and with it the step, outlives the daemon and
// a restarted daemon takes the step's worker back through the shim (its own
// process group, output lines, exit status either way). srun relays the task's output and exit
// status, so a step looks to the job driver like any other process:
//  - output: the task's lines, as srun prints them (srun's own errors too);
//  - exit: srun's status is the task's; a status 128+N is reported as "killed
//    by signal N", which is how srun reports a task a signal ended;
//  - Signal(): `scancel --signal=SIG J.S` for the step (found by its name with
//    squeue), so the task gets exactly that signal (srun would turn a SIGTERM
//    into a SIGKILL, and a SIGKILL of srun would leave the step running); before
//    the step exists, or when scancel fails, srun itself gets the signal;
//  - no orphans: when srun ends by a signal (its step may live on without it),
//    the step is cancelled (`scancel --signal=KILL`), and on_exit runs once
//    squeue no longer lists it (or after 20 s).
// Steps are cancelled, never the allocation.
//
// The pid Launch() returns is srun's, on the daemon's machine (the task's pid
// is only known on its node).
//
// Launch() also asks Slurm for the node's address (NodeAddr, `scontrol show
// node`) and gives it to the worker as HOROVODD_NODE_ADDR, which its rings bind
// to; an unknown or unusable node fails the launch with UNAVAILABLE.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/launch/launcher.h"
#include "discovery/slurm_commands.h"

namespace horovodd::daemon {

// The variable with the address Slurm knows the worker's node by; the worker
// runtime binds its rings to it (unless --network-interface says otherwise).
inline constexpr char kNodeAddressVariable[] = "HOROVODD_NODE_ADDR";

// A job's options for the Slurm launcher (its route's, --launcher slurm).
struct SlurmStepOptions final : RouteOptions {
  std::string job_id;  // the allocation every worker is a step of
};

struct SlurmLauncherOptions {
  // For each scontrol, squeue and scancel run.
  absl::Duration command_timeout = absl::Seconds(10);
  discovery::CommandRunner run;  // unset: RunCommand with command_timeout
};

class SlurmLauncher final : public Launcher {
 public:
  // `srun_launcher` starts the srun processes on this machine (each launch
  // routed kLocal) and must outlive this launcher.
  static std::unique_ptr<SlurmLauncher> Create(Launcher* srun_launcher,
                                               SlurmLauncherOptions options = {});
  // Kills every step still running and waits (bounded) for their on_exit.
  // Not from inside a callback.
  ~SlurmLauncher() override;
  SlurmLauncher(const SlurmLauncher&) = delete;
  SlurmLauncher& operator=(const SlurmLauncher&) = delete;

  // Starts launch.spec as a step of the allocation the route's
  // SlurmStepOptions name, on node launch.host. INVALID_ARGUMENT without a
  // job id; FAILED_PRECONDITION when
  // srun is not in the worker's PATH; UNAVAILABLE when Slurm cannot be asked
  // or the node is unknown or not usable; else what LocalLauncher::Launch
  // returns for srun. Blocks for one scontrol call.
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;
  // Queues `sig` for the step and returns; NOT_FOUND once srun has exited.
  absl::Status Signal(int64_t handle, int sig) override;

  // SIGTERM to every step, SIGKILL to those left after `grace`; returns when
  // all of them finished (or after a bounded wait). Not from a callback.
  void TerminateAll(absl::Duration grace) override;

  // The steps outlive this launcher where their srun processes outlive the
  // srun launcher (under shims): that one is detached first (no srun
  // callback comes any more), then every step is forgotten, so that nothing
  // is killed at destruction.
  bool DetachAll() override;

  // Steps whose on_exit has not returned yet.
  size_t running() const override;

 private:
  struct Step {
    std::string job_id;
    std::string name;         // --job-name, unique per daemon process
    int64_t srun_handle = 0;  // srun_launcher_'s; 0 until srun started
    bool exited = false;      // srun is gone: no more signals
  };

  SlurmLauncher(Launcher* srun_launcher, SlurmLauncherOptions options);

  // The control thread runs signals and step cleanups, so neither the job's
  // loop nor the local launcher's I/O thread waits on slurmctld.
  void ControlLoop();
  bool HasWorkOrQuits() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Post(std::function<void()> work);
  void DeliverSignal(int64_t handle, int sig);
  // "J.S" of the step named `name`, or "" when squeue does not list it.
  std::string FindStep(const std::string& job_id, const std::string& name);
  void OnSrunExit(int64_t handle, const ExitInfo& exit,
                  const std::function<void(const ExitInfo&)>& on_exit);
  bool AwaitFinished(absl::Duration timeout);

  Launcher* const srun_launcher_;
  const SlurmLauncherOptions options_;

  mutable absl::Mutex mu_;
  int64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Step> steps_ ABSL_GUARDED_BY(mu_);  // on_exit not returned yet
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;

  std::thread control_;
};

}  // namespace horovodd::daemon
