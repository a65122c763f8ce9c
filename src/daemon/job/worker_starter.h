// Starts a job's workers: the environment each one gets (the daemon's address
// and the job's worker token, the user's --env, the HOROVOD_* variables of
// Horovod's rank plan for the generation it joins), the launch itself, and
// where it runs: a worker on this machine starts at once, on the loop; one on
// another host (SSH) or in a Slurm step starts on the job's launch pool,
// since it waits on other machines (sshd, slurmctld), and its outcome comes
// back to the loop. The driver decides which workers to start, and
// WorkerLaunches (worker_launches.h) what comes of each start; this is the
// only place that builds a WorkerLaunch.
//
// Threading: owned by one JobDriver and used on its loop thread; a remote
// launch runs on a pool thread with a copy of what it needs, and posts its
// outcome to the loop. The handlers it was given run on the loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/job/job_context.h"
#include "daemon/job_events/event_log.h"
#include "daemon/launch/launch_pool.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/event_loop.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/membership/membership.h"
#include "daemon/workers/worker_table.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class WorkerStarter {
 public:
  // Remote workers being started at once (each blocks a pool thread for
  // its SSH connect, login and start).
  static constexpr size_t kMaxConcurrentLaunches = 8;

  // A worker's process exited; `exited_at`: when the launcher said so.
  using ExitHandler =
      std::function<void(int64_t worker_id, const ExitInfo& exit, absl::Time exited_at)>;
  // What came of a launch on the pool.
  using LaunchedHandler =
      std::function<void(int64_t worker_id, const absl::StatusOr<LaunchedProcess>& launched)>;

  // Everything given outlives the starter; `on_exit` and `on_launched` run on `loop`.
  // A worker's HOROVODD_BIND_ADDR is `bind_addresses`' for its host (looked
  // up on the pool for a host elsewhere).
  WorkerStarter(const JobContext& context, const v1::JobSpec& spec, EventLoop& loop,
                EventLog& events, BindAddresses& bind_addresses, ExitHandler on_exit,
                LaunchedHandler on_launched);

  // Horovod's ranks for the generation `plan` is about to launch (survivors,
  // then new workers), for the HOROVOD_* variables each new worker starts with.
  void PlanRanks(const Plan& plan);
  // Starts `w` as rank `planned_rank` of the planned generation. On this
  // machine it starts now: its process, or why it did not start. Elsewhere
  // it starts on the pool: std::nullopt, and the outcome comes to on_launched.
  std::optional<absl::StatusOr<LaunchedProcess>> Launch(const Worker& w, int planned_rank);
  // Whether `failure`, a launch's (`on_loop`: one started on this machine),
  // means that no worker of the job can start anywhere: the command cannot
  // run, or Slurm has no srun or no allocation.
  bool FailsEverywhere(const absl::Status& failure, bool on_loop) const;
  // What the launcher calls back with `w`'s output (OUTPUT events) and exit
  // (on_exit); for workers taken back after a daemon restart as well.
  ProcessCallbacks CallbacksFor(const Worker& w);
  // Waits for the launches running; none starts after. Once the loop has
  // stopped: a launch finishing then finds it stopped and kills its worker.
  void Shutdown();

 private:
  // `w`'s environment but HOROVODD_BIND_ADDR (Launch sets it).
  std::map<std::string, std::string> Environment(const Worker& w, int planned_rank);
  // What every worker of the job gets (the daemon's environment, the user's
  // --env, the job's): built once, at the first launch, as each launch
  // would otherwise read the whole environment again.
  const std::map<std::string, std::string>& JobEnvironment();

  const JobContext& context_;
  const v1::JobSpec& spec_;
  EventLoop& loop_;
  EventLog& events_;
  BindAddresses& bind_addresses_;
  const ExitHandler on_exit_;
  const LaunchedHandler on_launched_;
  // The planned generation's ranks, by planned rank.
  std::vector<RankInfo> planned_ranks_;
  std::optional<std::map<std::string, std::string>> job_environment_;
  LaunchPool pool_{kMaxConcurrentLaunches};
};

}  // namespace horovodd::daemon
