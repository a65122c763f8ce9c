// One elastic job: keeps it between min and max workers as hosts come and go
// and workers fail, answers its workers' rendezvous, owns its key-value
// namespace, and decides when the job has ended and why (see DESIGN.md, "The
// reset protocol").
//
// Threading: every field below is owned by `loop_`'s thread. Public methods
// may be called from any thread; they post to the loop. Replies go through
// the callbacks they were given, from the loop thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/job/event_log.h"
#include "daemon/job/event_loop.h"
#include "daemon/job/job_observer.h"
#include "daemon/job/kv_namespace.h"
#include "daemon/job/membership.h"
#include "daemon/job/worker_channel.h"
#include "daemon/launch/launch_pool.h"
#include "daemon/launch/launcher.h"
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
};

class JobDriver {
 public:
  // Remote workers being started at once (each blocks a pool thread for
  // its SSH connect, login and start).
  static constexpr size_t kMaxConcurrentLaunches = 8;

  using RendezvousReply = std::function<void(absl::StatusOr<v1::RendezvousResponse>)>;
  using KvGetReply = std::function<void(absl::StatusOr<v1::KvGetResponse>)>;

  // `spec` must have passed ValidateJobSpec.
  JobDriver(JobContext context, v1::JobSpec spec);
  // Kills whatever workers are left and waits for them.
  ~JobDriver();

  void Start();
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
  const EventLog& events() const { return events_; }
  const std::string& job_id() const { return context_.job_id; }
  const std::string& worker_token() const { return context_.worker_token; }

 private:
  // Status(), on the loop thread.
  v1::JobStatus StatusNow();

  struct Worker {
    int64_t id = 0;
    std::string host;
    int64_t handle = 0;               // the launcher's; 0 once ended
    int pid = 0;                      // on its host, for people
    v1::WorkerState state = v1::WORKER_STARTING;
    int exit_code = 0;
    std::string lost_reason;          // set when the driver killed it
    int64_t joined_generation = 0;    // last ready generation it was part of
    int64_t last_commit = 0;
    int64_t reported_failure_generation = 0;
    int generations_joined = 0;
    absl::Time launched_at;
    absl::Time last_seen;             // last heartbeat (or launch)
    bool attached = false;
    // Being started on a remote host (launches_): no handle yet, but not
    // gone either; OnRemoteLaunched settles it.
    bool launching = false;
    std::shared_ptr<WorkerChannel> channel;
    // No process, and none on its way.
    bool gone() const { return handle == 0 && !launching; }
    bool waiting = false;             // has a rendezvous call pending
    int64_t after_generation = 0;
    RendezvousReply reply;
    std::shared_ptr<std::atomic<int>> rank;  // read by the launcher's I/O thread
  };

  // Membership.
  void OnHosts(absl::StatusOr<discovery::HostSet> hosts);
  void Replan(const std::string& cause, bool failure, bool force = false);
  void LaunchWorker(const std::string& host, int planned_rank);
  void OnRemoteLaunched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched);
  // A launch failed because of its host: cooldown, and a new plan.
  void OnHostLaunchFailure(const std::string& host, const absl::Status& status);
  void TryCompleteRendezvous();
  // `rank`: w's rank in ready_members_ when the caller knows it (-1: look it up).
  void AnswerReady(Worker& w, int rank = -1);
  void AnswerRemoved(Worker& w);
  void ScheduleKvExpiry();
  void NotifyWorkers(bool abort);
  // Tells the members of a grown job about generation_ once every joiner
  // (see joiners_) waits for it; nothing while one is still starting.
  void NotifyOnceJoinersWait();
  // Whether member `id` knows of generation_ (or will at once: a joiner).
  bool Told(int64_t id) const;
  void OnWorkerExit(int64_t worker_id, const ExitInfo& exit);
  void OnWorkerFailed(Worker& w, const std::string& what);
  // Ends the job SUCCEEDED once every member has finished or is gone for good
  // (see the .cc); `plain`: a job whose command never joined a generation.
  void MaybeFinishSucceeded(bool plain);
  void DeclareLost(Worker& w, const std::string& reason);
  void CheckLiveness();
  void ScheduleCooldownWakeup();
  void ArmBelowMinTimer(int available);

  // Job end.
  void Finish(v1::JobState state, const std::string& reason);
  void MaybeCloseLog();

  // Helpers.
  Worker* FindWorker(int64_t id);
  bool IsMember(int64_t id) const;
  int RankOf(int64_t id) const;
  std::string Describe(const Worker& w) const;
  void Event(v1::JobEvent::Kind kind, const std::string& message, const std::string& code = "");
  void SetState(v1::JobState state);
  std::map<std::string, std::string> WorkerEnvironment(const Worker& w, int planned_rank) const;
  bool Terminal() const;
  int MaxSize() const;

  const JobContext context_;
  const v1::JobSpec spec_;
  EventLog events_;

  // ---- loop-owned state ----
  v1::JobState state_ = v1::PENDING;
  std::string reason_;
  discovery::HostManager hosts_;
  bool hosts_known_ = false;
  std::string last_discovery_error_;
  std::map<int64_t, Worker> workers_;
  int64_t next_worker_id_ = 1;
  int64_t generation_ = 0;          // newest planned
  int64_t ready_generation_ = 0;    // newest stable (answered)
  std::vector<int64_t> members_;    // of generation_, in rank order
  // members_[0, rendezvous_scan_) were seen waiting for generation_, so each
  // rendezvous arrival resumes the scan there (O(N) per generation, not
  // O(N^2)); reset whenever members_ is rebuilt.
  size_t rendezvous_scan_ = 0;
  // The new workers of a generation that only grows a running job: until
  // all of them wait for it, the other members are not told of it (they
  // train on) and the elastic timeout for joining does not run.
  std::vector<int64_t> joiners_;
  bool joiners_pending_ = false;
  std::vector<int64_t> ready_members_;
  std::vector<RankInfo> rank_infos_;  // of ready_members_
  // ready_generation_ is generation shrinks_generation_ without the workers
  // of excluded_ranks_ there (0: it is not); see RendezvousResponse.
  int64_t shrinks_generation_ = 0;
  std::vector<int> excluded_ranks_;
  absl::Time planned_at_;           // when generation_ was planned
  KvNamespace kv_;
  int64_t last_commit_ = 0;
  int resets_ = 0;
  std::vector<v1::ResetRecord> reset_history_;  // newest last, bounded
  bool finishing_ = false;          // a member exited 0: no more resets
  absl::Time reset_detected_ = absl::InfinitePast();  // when the running reset began
  EventLoop::TimerId below_min_timer_ = 0;
  EventLoop::TimerId cooldown_timer_ = 0;
  EventLoop::TimerId kv_timer_ = 0;
  EventLoop::TimerId liveness_timer_ = 0;
  absl::Time created_ = absl::Now();
  absl::Time started_;
  absl::Time ended_at_;
  std::atomic<bool> ended_{false};

  std::unique_ptr<DiscoveryPoller> poller_;
  // Remote launches in flight post their outcome to loop_: the destructor
  // shuts the pool down (waits for them) before loop_ goes.
  LaunchPool launches_{kMaxConcurrentLaunches};
  EventLoop loop_;  // last: destroyed (joined) first
};

// The address a worker on `host` binds its rings to (job_launch.cc).
std::string BindAddressFor(const std::string& host);

// Checks a submitted spec; INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
