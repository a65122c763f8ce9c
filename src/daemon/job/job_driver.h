// One elastic job: keeps it between min and max workers as hosts come and go
// and workers fail, answers its workers' rendezvous, and decides when the job
// has ended and why (docs/architecture/job-lifecycle.md draws its states).
// It coordinates parts that each keep their own books and say so in their
// headers: the lifecycle (state, phase), the worker table (processes,
// streams, pending calls), the generation planner (members, ranks,
// rendezvous), the liveness monitor (who is lost; it checks on its own
// timer), the reset history, the goodput ledger (where the job's time goes),
// the hosts (JobHosts: discovery, cooldowns, drains, the wait for --min-np
// slots), the key-value namespace, the status view, the checkpointer, the
// end (JobEnd: success, stopping the workers, closing), the worker starter
// (environment, rank plan, the launch) and the launches (WorkerLaunches:
// what comes of one). The driver decides what
// happens next: which generation to plan, what a worker's exit or loss
// means, when the job fails; and says so in the job's events. Its methods
// are spread over job_driver.cc (construction, entry points),
// job_membership.cc (generations, exits, losses), job_resume.cc (taking
// a job back after a restart) and job_hold.cc (decisions held while the
// daemon's decision gate is shut: a leader that cannot renew its etcd lease).
//
// Threading: every field below, the parts included, is owned by `loop_`'s
// thread; time comes from JobContext::clock. Public methods may be called
// from any thread; they post to the loop. Replies go through the callbacks
// they were given, from the loop thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/goodput/goodput_ledger.h"
#include "daemon/job/job_checkpointer.h"
#include "daemon/job/job_context.h"
#include "daemon/job/job_end.h"
#include "daemon/job/job_kv.h"
#include "daemon/job/job_status_view.h"
#include "daemon/job/worker_launches.h"
#include "daemon/job/worker_starter.h"
#include "daemon/job_events/event_log.h"
#include "daemon/job_events/event_recorder.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/job_events/reset_history.h"
#include "daemon/job_hosts/job_hosts.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"
#include "daemon/loop/event_loop.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/stall/stall_detector.h"
#include "daemon/workers/liveness_monitor.h"
#include "daemon/workers/worker_channel.h"
#include "daemon/workers/worker_table.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobDriver {
 public:
  // How long an evicted worker has between SIGTERM and SIGKILL.
  static constexpr absl::Duration kEvictGrace = absl::Seconds(5);

  using RendezvousReply = Worker::RendezvousReply;
  using KvGetReply = JobKv::GetReply;

  // `spec` must have passed ValidateJobSpec.
  JobDriver(JobContext context, v1::JobSpec spec);
  // Stops the loop and waits for the launches in flight; the workers must
  // be gone (Ended) or left to a restarted daemon (Abandon).
  ~JobDriver();

  void Start();
  // Instead of Start, for a job an earlier run of the daemon was running
  // (job_resume.cc): its state from `checkpoint`, and the workers that its
  // shims still hold (`found`; the others count as lost). When none of them
  // is still running and the daemon was away (`daemon_away`) past the
  // workers' grace period (`worker_grace`), they ended for want of a daemon:
  // the job FAILED, saying so. Returns the callbacks for each found worker's
  // output and exit. Blocks until the loop has done it.
  std::map<int64_t, ProcessCallbacks> Resume(const JobCheckpoint& checkpoint,
                                             const std::vector<ReattachedWorker>& found,
                                             absl::Duration daemon_away,
                                             absl::Duration worker_grace);
  // The daemon goes away and leaves this job running, for a restarted one
  // to Resume: the loop stops now, nothing more is decided or recorded.
  // The launcher must not call back afterwards (ShimLauncher::DetachAll).
  void Abandon();
  void Cancel(const std::string& reason);
  // Operator control of one host for this job (see DrainHostRequest):
  // drained, it takes no workers until undrained.
  void SetDrained(const std::string& host, bool drained);

  // Worker RPCs.
  void Rendezvous(const v1::RendezvousRequest& request, RendezvousReply reply);
  void KvSet(const v1::KvSetRequest& request, std::function<void(absl::Status)> reply);
  void KvGet(const v1::KvGetRequest& request, KvGetReply reply);
  void Attach(int64_t worker_id, std::shared_ptr<WorkerChannel> channel);
  // `activity`: what the worker reported doing, if it did (checked).
  void Heartbeat(int64_t worker_id, std::optional<v1::WorkerActivity> activity = std::nullopt);
  // Several workers' heartbeats (one host stream's message) in one post to
  // the loop: each counts as its own Heartbeat.
  struct WorkerHeartbeat {
    int64_t worker_id = 0;
    std::optional<v1::WorkerActivity> activity;
  };
  void Heartbeats(std::vector<WorkerHeartbeat> heartbeats);
  void Detach(int64_t worker_id, const WorkerChannel* channel);
  void ReportCommit(const v1::CommitReport& report);
  void ReportFailure(const v1::FailureReport& report);

  // A consistent snapshot, taken on the loop thread (blocks the caller briefly).
  v1::JobStatus Status();
  bool Ended() const { return lifecycle_.Ended(); }
  // Waits until Ended() or `timeout` passed; whether it ended.
  bool WaitEnded(absl::Duration timeout) const { return lifecycle_.WaitEnded(timeout); }
  const EventLog& events() const { return events_; }
  const std::string& job_id() const { return context_.job_id; }
  const std::string& worker_token() const { return context_.worker_token; }
  const v1::JobSpec& spec() const { return spec_; }
  const std::string& client_request_id() const { return context_.client_request_id; }

 private:
  // Why a new generation may be needed.
  enum class ReplanTrigger {
    // Hosts changed, drained or cooled down, a launch failed: a new
    // generation only if the plan differs; a job that only grows keeps
    // training while its new workers start.
    kMembershipChange,
    // A member failed or was lost: its peers abort their collectives.
    kWorkerFailure,
    // A worker's ring broke in a generation the driver thinks is fine: a new
    // generation even if the plan is the same, and peers abort.
    kBrokenRing,
  };

  // Membership (job_membership.cc).
  void Replan(const std::string& cause, ReplanTrigger trigger);
  void TryCompleteRendezvous();
  // Tells the members of a grown job about the new generation once every
  // joiner waits for it; nothing while one is still starting.
  void NotifyOnceJoinersWait();
  // The liveness monitor found `worker_id` lost (heard from last at
  // `last_seen`): it is killed, and its exit counts as a failure.
  void OnWorkerLost(int64_t worker_id, const std::string& reason, absl::Time last_seen);
  // A heartbeat of `worker_id` heard at `now`, on the loop.
  void HeardHeartbeat(int64_t worker_id, std::optional<v1::WorkerActivity> activity,
                      absl::Time now);
  void OnWorkerExit(int64_t worker_id, const ExitInfo& exit, absl::Time exited_at);
  void OnWorkerFailed(Worker& w, const std::string& what);
  // Hot spares: those `plan` removes leave, and those it adds start once no
  // generation is forming (a start competes with the reset for the CPUs).
  void UpdateSpares(const Plan& plan);
  // A spare ended by itself (or was killed as lost): its host is
  // blacklisted as any failing worker's, and the job replans (a new spare
  // if slots allow; no reset unless members shared its host).
  void OnSpareExit(Worker& w, const ExitInfo& exit);
  // Spares are not needed any more (the job is finishing): they leave.
  void DismissSpares();

  // Starts the liveness monitor's checks: a lost worker is killed, a stalled
  // daemon is a job event.
  void WatchLiveness();

  // Stalls (job_stalls.cc): the detector's checks on the loop's clock while
  // the job runs, and what its verdicts lead to.
  void WatchStalls();
  void CheckStalls();
  // The stall lasted past the job's act time: an elastic job evicts its
  // culprits (below --min-np too, saying so), a fixed-size one fails naming them.
  void ActOnStall(const v1::StallReport& stall);
  // The hosts of the ready generation's ranks already on their way out
  // (evicted or lost): a failure blacklists its host, so every rank there goes.
  std::set<std::string> LeavingHosts() const;
  // How many of the ready generation's ranks are on none of `gone`.
  int RanksLeftWithout(const std::set<std::string>& gone) const;
  // Ends worker `worker_id` for `reason` (SIGTERM, SIGKILL after kEvictGrace);
  // its exit counts as a failure, as a lost worker's does.
  void Evict(int64_t worker_id, const std::string& reason);

  // Held decisions (job_hold.cc). While the gate (JobContext::gate) is not
  // open, the job acts on no process and no membership: a worker's exit or
  // loss, a replan, an elastic-timeout failure and stall actions wait, and
  // are taken once it reopens; workers train on meanwhile. True if held (the
  // trigger is kept where it must be).
  bool Held();
  bool HoldExit(int64_t worker_id, const ExitInfo& exit, absl::Time exited_at);
  bool HoldLoss(int64_t worker_id, const std::string& reason);
  bool HoldReplan(const std::string& cause, ReplanTrigger trigger);
  bool HoldFailure(const std::string& why);
  // The gate moved: says so in the job's events; reopened, acts on what was held.
  void GateChanged();

  // Resume, on the loop thread (job_resume.cc).
  void ResumeNow(const JobCheckpoint& checkpoint, const std::vector<ReattachedWorker>& found,
                 absl::Duration daemon_away, absl::Duration worker_grace,
                 std::map<int64_t, ProcessCallbacks>& callbacks);

  const JobContext context_;
  const v1::JobSpec spec_;
  const Clock& clock_;
  EventLog events_;
  JobLifecycle lifecycle_;

  // ---- the parts, each keeping its own books ----
  WorkerTable workers_;
  GenerationPlanner generations_;
  EventRecorder recorder_;
  LivenessMonitor liveness_;
  ResetHistory resets_;
  GoodputLedger goodput_;
  // Its poller posts discovery's answers to loop_: the destructor stops it
  // before loop_.
  JobHosts hosts_;
  JobKv kv_;
  JobStatusView status_;
  JobCheckpointer checkpointer_;
  JobEnd end_;
  // Its launches in flight post their outcome to loop_: the destructor shuts
  // them down (waits for them) after stopping loop_, before loop_ goes.
  WorkerStarter starter_;
  WorkerLaunches launches_;

  // Names the ranks that hold the job up; its timer runs on loop_.
  StallDetector stall_;
  EventLoop::TimerId stall_timer_ = 0;

  // ---- what coordinating them needs ----
  // The first worker that failed and how ("worker 3 (rank 1, a, pid 9): exited
  // with status 1"), for the job's end when nothing is left.
  std::string first_failure_;
  // Whether the job said it has fewer spares than --hot-spares (said once).
  bool said_spares_short_ = false;

  // ---- what waits while the decision gate is shut (job_hold.cc) ----
  struct HeldExit {
    int64_t worker_id;
    ExitInfo exit;
    absl::Time exited_at;
  };
  struct HeldDecisions {
    bool said = false;  // the hold is in the job's events
    std::vector<HeldExit> exits;
    std::set<int64_t> lost;  // said lost; the liveness monitor reports them again
    std::optional<std::pair<std::string, ReplanTrigger>> replan;
    std::optional<std::string> failure;
  };
  HeldDecisions held_;
  int64_t gate_watch_ = 0;
  EventLoop loop_;  // last: destroyed (joined) first
};

// What a job ends with when no worker is left and nothing can run (Horovod's
// launcher message, then the first worker that failed and how).
inline constexpr char kNonZeroExitMessage[] =
    "Horovod detected that one or more processes exited with non-zero status, thus causing "
    "the job to be terminated. The first process to do so was ";

// Checks a submitted spec; INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
