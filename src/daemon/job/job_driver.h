// One elastic job: keeps it between min and max workers as hosts come and go
// and workers fail, answers its workers' rendezvous, owns its key-value
// namespace, and decides when the job has ended and why (see DESIGN.md, "The
// reset protocol"). It coordinates the parts that keep the books: the worker
// table (processes, streams, pending calls), the generation planner
// (members, ranks, rendezvous), the liveness monitor and the reset history;
// the driver decides what happens next and says so in the job's events.
//
// Threading: every field below, the parts included, is owned by `loop_`'s
// thread; time comes from JobContext::clock. Public methods
// may be called from any thread; they post to the loop. Replies go through
// the callbacks they were given, from the loop thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/job/event_log.h"
#include "daemon/job/generation_planner.h"
#include "daemon/job/job_observer.h"
#include "daemon/job/liveness_monitor.h"
#include "daemon/job/reset_history.h"
#include "daemon/job/worker_channel.h"
#include "daemon/job/worker_table.h"
#include "daemon/kv/kv_namespace.h"
#include "daemon/launch/launch_pool.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"
#include "daemon/loop/event_loop.h"
#include "discovery/host_manager.h"
#include "discovery/host_source.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class DiscoveryPoller;

struct JobContext {
  std::string job_id;
  std::string daemon_address;   // what workers dial, host:port
  Launcher* launcher;           // shared by all jobs, outlives them
  JobObserver* observer = nullptr;  // daemon-wide; outlives the job; may be null
  // The job's own secret (256 random bits, hex), handed to its workers in
  // HOROVODD_WORKER_TOKEN; opens this job's WorkerService calls and nothing
  // else. Never in the spec, the status, the journal or a log.
  std::string worker_token;
  // Set for every worker by the daemon (its TLS settings: HOROVODD_TLS_*).
  std::map<std::string, std::string> worker_env;
  // What the job's key-value namespace may hold (config limits.max_kv_*).
  KvLimits kv_limits;
  // What the job reads time from and its loop waits on; outlives the job.
  const Clock* clock = &RealClock();
  // Write JobCheckpoints to the observer (a daemon that takes jobs back
  // after a restart); off, nothing is computed for them.
  bool checkpoints = false;
};

class JobDriver {
 public:
  // Remote workers being started at once (each blocks a pool thread for
  // its SSH connect, login and start).
  static constexpr size_t kMaxConcurrentLaunches = 8;

  using RendezvousReply = Worker::RendezvousReply;
  using KvGetReply = std::function<void(absl::StatusOr<v1::KvGetResponse>)>;

  // `spec` must have passed ValidateJobSpec.
  JobDriver(JobContext context, v1::JobSpec spec);
  // Kills whatever workers are left and waits for them.
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
  // Operator control of one host for this job (see DrainHostRequest).
  void Drain(const std::string& host);
  void Undrain(const std::string& host);

  // Worker RPCs.
  void Rendezvous(const v1::RendezvousRequest& request, RendezvousReply reply);
  void KvSet(const v1::KvSetRequest& request, std::function<void(absl::Status)> reply);
  void KvGet(const v1::KvGetRequest& request, KvGetReply reply);
  void Attach(int64_t worker_id, std::shared_ptr<WorkerChannel> channel);
  void Heartbeat(int64_t worker_id);
  void Detach(int64_t worker_id, const WorkerChannel* channel);
  void ReportCommit(const v1::CommitReport& report);
  void ReportFailure(const v1::FailureReport& report);

  // A consistent snapshot, taken on the loop thread (blocks the caller briefly).
  v1::JobStatus Status();
  bool Ended() const { return ended_.load(); }
  // Waits until Ended() or `timeout` passed; whether it ended.
  bool WaitEnded(absl::Duration timeout) const {
    return ended_notice_.WaitForNotificationWithTimeout(timeout);
  }
  const EventLog& events() const { return events_; }
  const std::string& job_id() const { return context_.job_id; }
  const std::string& worker_token() const { return context_.worker_token; }

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
  // What members hear on their Attach streams when a generation is planned.
  enum class GenerationNotice { kJoinWhenReady, kAbortCollectives };
  // Whose finishing ends the job SUCCEEDED.
  enum class Finishers {
    kPlannedMembers,  // a command that never joined a generation (horovodrun -np 2 hostname)
    kReadyMembers,    // the members of the ready generation
  };

  // Status(), on the loop thread.
  v1::JobStatus StatusNow();
  absl::Time Now() const { return clock_.Now(); }

  // Membership (job_membership.cc).
  void OnHosts(absl::StatusOr<discovery::HostSet> hosts);
  void Replan(const std::string& cause, ReplanTrigger trigger);
  void TryCompleteRendezvous();
  // `rank`: w's rank in the ready generation when the caller knows it (-1: look it up).
  void AnswerReady(Worker& w, int rank = -1);
  void AnswerRemoved(Worker& w);
  void ScheduleKvExpiry();
  void NotifyWorkers(GenerationNotice notice);
  // Tells the members of a grown job about the new generation once every
  // joiner waits for it; nothing while one is still starting.
  void NotifyOnceJoinersWait();
  void OnWorkerExit(int64_t worker_id, const ExitInfo& exit);
  void OnWorkerFailed(Worker& w, const std::string& what);
  // Ends the job SUCCEEDED once every one of `finishers` has finished or is
  // gone for good (see the .cc).
  void MaybeFinishSucceeded(Finishers finishers);
  void DeclareLost(Worker& w, const std::string& reason);
  void CheckLiveness();
  void ScheduleCooldownWakeup();
  // `needed`: the slots the job waits for (-np at its start, --min-np later).
  void ArmBelowMinTimer(int available, int needed);
  // Every worker failed or is gone and `plan` has nothing to run on.
  bool NothingLeftToRunOn(const Plan& plan) const;
  // Why a removed worker leaves, for its event.
  std::string WhyLeaving(const Plan& plan, const Worker& w) const;

  // Launching (job_launch.cc).
  void LaunchWorker(const std::string& host, int planned_rank);
  void OnRemoteLaunched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched);
  // A launch failed because of its host: cooldown, and a new plan.
  void OnHostLaunchFailure(const std::string& host, const absl::Status& status);
  std::map<std::string, std::string> WorkerEnvironment(const Worker& w, int planned_rank) const;
  // Horovod's ranks for the generation `plan` is about to launch (survivors,
  // then new workers), for the HOROVOD_* variables each new worker starts with.
  void PlanRanks(const Plan& plan);

  // Checkpoints for the journal (job_resume.cc): `urgent` ones are written
  // once the running closure is done, others (commits) at most every 100 ms.
  void RequestCheckpoint(bool urgent);
  void WriteCheckpoint();
  void ResumeNow(const JobCheckpoint& checkpoint, const std::vector<ReattachedWorker>& found,
                 absl::Duration daemon_away, absl::Duration worker_grace,
                 std::map<int64_t, ProcessCallbacks>& callbacks);
  void StartDiscovery();
  ProcessCallbacks CallbacksFor(const Worker& w);

  // Job end.
  void Finish(v1::JobState state, const std::string& reason);
  void MaybeCloseLog();

  // Helpers.
  std::string Describe(const Worker& w) const;
  void Event(v1::JobEvent::Kind kind, const std::string& message, const std::string& code = "");
  void SetState(v1::JobState state);
  bool Terminal() const;

  const JobContext context_;
  const v1::JobSpec spec_;
  const Clock& clock_;
  EventLog events_;

  // ---- loop-owned state: the parts, and what coordinating them needs ----
  WorkerTable workers_;
  GenerationPlanner generations_;
  LivenessMonitor liveness_;
  ResetHistory resets_;
  discovery::HostManager hosts_;
  // The planned generation's ranks, by planned rank (PlanRanks, job_launch.cc).
  std::vector<RankInfo> planned_ranks_;
  KvNamespace kv_;
  v1::JobState state_ = v1::PENDING;
  std::string reason_;
  bool hosts_known_ = false;
  std::string last_discovery_error_;
  bool finishing_ = false;          // a member exited 0: no more resets
  // The first worker that failed and how ("worker 3 (rank 1, a, pid 9): exited
  // with status 1"), for the job's end when nothing is left.
  std::string first_failure_;
  EventLoop::TimerId below_min_timer_ = 0;
  EventLoop::TimerId cooldown_timer_ = 0;
  EventLoop::TimerId kv_timer_ = 0;
  EventLoop::TimerId liveness_timer_ = 0;
  bool checkpoint_posted_ = false;
  EventLoop::TimerId checkpoint_timer_ = 0;
  absl::Time last_checkpoint_ = absl::InfinitePast();
  const absl::Time created_;
  absl::Time started_;
  absl::Time ended_at_;
  std::atomic<bool> ended_{false};
  absl::Notification ended_notice_;  // notified with ended_, once

  std::unique_ptr<DiscoveryPoller> poller_;
  // Remote launches in flight post their outcome to loop_: the destructor
  // shuts the pool down (waits for them) before loop_ goes.
  LaunchPool launches_{kMaxConcurrentLaunches};
  EventLoop loop_;  // last: destroyed (joined) first
};

// The blacklist cooldown of `spec` (--blacklist-cooldown-range LO HI); with no
// range (HI 0), Horovod's default: blacklisted for the rest of the job.
discovery::CooldownPolicy CooldownPolicyOf(const v1::JobSpec& spec);

// What a job ends with when no worker is left and nothing can run (Horovod's
// launcher message, then the first worker that failed and how).
inline constexpr char kNonZeroExitMessage[] =
    "Horovod detected that one or more processes exited with non-zero status, thus causing "
    "the job to be terminated. The first process to do so was ";

// Checks a submitted spec; INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
