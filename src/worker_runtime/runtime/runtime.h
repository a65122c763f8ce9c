// The worker runtime behind horovodd.h and elastic.h: one worker's membership
// in its job (daemon connection, current assignment, the current
// generation's communicators), plus the thin process-wide layer that
// Init()/Shutdown() manage.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "horovodd/async.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/comm/communicator_reaper.h"
#include "worker_runtime/comm_factory/host_layout.h"
#include "worker_runtime/daemon_client/daemon_client.h"
#include "worker_runtime/daemon_client/daemon_connection.h"
#include "worker_runtime/engine/engine.h"
#include "worker_runtime/gpu/gpu_operations.h"
#include "worker_runtime/runtime/gpu_collectives.h"

namespace horovodd::internal {

// Makes the runtime's connection to its daemon from `daemon` (whose
// on_message the runtime sets before calling it).
using DaemonConnector =
    std::function<absl::StatusOr<std::unique_ptr<DaemonConnection>>(DaemonClientOptions daemon)>;

struct RuntimeOptions {
  DaemonClientOptions daemon;
  // Unset: DaemonClient::Create, the gRPC client. Tests connect the runtime
  // to an in-process fake instead.
  DaemonConnector connect_daemon;
  // Bounds each key wait while connecting a ring, and the ring's operations.
  absl::Duration ring_timeout = absl::Seconds(30);
  // Where CUDA tensors' collectives run (HOROVOD_GPU_OPERATIONS).
  GpuOperations gpu_operations = BuiltWithNccl() ? GpuOperations::kNccl : GpuOperations::kGloo;
  // The collective engine's fusion threshold and cycle time.
  EngineOptions engine;
  // Shared memory among the ranks of a host (HOROVODD_SHM=0: off) and the
  // hierarchical allreduce across hosts (HOROVOD_HIERARCHICAL_ALLREDUCE);
  // the places come from each generation's assignment
  // (comm_factory/host_layout.h).
  LocalOptions local;
  // Horovod's stall check (HOROVOD_STALL_CHECK_*), for every engine.
  StallOptions stall;

  // From the environment the daemon gives its workers: HOROVODD_DAEMON_ADDR,
  // HOROVODD_JOB_ID, HOROVODD_WORKER_ID (required), HOROVODD_WORKER_TOKEN,
  // HOROVODD_DAEMON_RELAYED (the address is its shim's relay),
  // HOROVODD_HEARTBEAT_MS (the interval until the daemon's first message
  // names the job's own), HOROVODD_DAEMON_GRACE_S, HOROVODD_RING_TIMEOUT_S
  // (or Horovod's HOROVOD_GLOO_TIMEOUT_SECONDS, which it overrides),
  // HOROVODD_SHM, HOROVODD_SHM_SLOT_BYTES, and the user's
  // HOROVOD_GPU_OPERATIONS, HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME,
  // HOROVOD_HIERARCHICAL_ALLREDUCE and HOROVOD_STALL_CHECK_DISABLE /
  // HOROVOD_STALL_CHECK_TIME_SECONDS / HOROVOD_STALL_SHUTDOWN_TIME_SECONDS.
  // FAILED_PRECONDITION naming the first missing variable; INVALID_ARGUMENT
  // naming a variable whose value does not parse.
  static absl::StatusOr<RuntimeOptions> FromEnvironment();
};

// This worker's place in one generation, as the daemon assigned it.
struct Assignment {
  int64_t generation = 0;
  int rank = -1;
  int size = 0;
  int local_rank = -1;
  int local_size = 0;
  int cross_rank = -1;
  int cross_size = 0;
  // Whether this generation's NCCL communicator may be shrunk from an older one.
  ShrinkPlan shrink;
};

enum class JoinOutcome { kJoined, kRemoved };

// When this process's last successful Join passed each of its phases
// (CLOCK_REALTIME seconds, 0 before the first): it began, the daemon's
// answer arrived, the ring's first pairs connected, the communicator was
// chosen (host groups set up). The reset benchmark logs them to split a
// reset's worker side.
struct JoinTimes {
  double began = 0;
  double asked = 0;  // the old generation left, the first rendezvous asked
  double answered = 0;
  double ring_connected = 0;
  double communicator_ready = 0;
};
JoinTimes LastJoinTimes();

// Where a collective on one process set (process_sets.h) goes: that set's
// engine, its ranks, and this rank's place in them.
struct ProcessSetView {
  int id = 0;
  Engine* engine = nullptr;
  std::shared_ptr<Engine> keep_alive;  // a set's engine, while the request is made
  std::vector<int> ranks;              // job ranks, ascending
  int set_rank = -1;                   // this rank's index in `ranks`
};

// One worker's membership in its job. The training thread calls every method;
// the attach thread only aborts the current generation's communicators
// (OnDaemonMessage); the engine threads run every collective (RunCollective,
// gpu()) while a generation is joined.
class Runtime {
 public:
  // Connects to the daemon and starts the Attach stream; joins nothing yet.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(RuntimeOptions options);
  ~Runtime();  // drops the communicators, then stops the daemon connection

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Drops the current communicators, rendezvouses for the first stable
  // generation after `after_generation`, connects that generation's ring and
  // makes its communicator (comm_factory/comm_factory.h). A ring that fails
  // to connect is reported (unless its generation was superseded) and the
  // next generation is tried, until one is up or the daemon says this worker
  // is removed. Errors: the daemon refused the rendezvous.
  absl::StatusOr<JoinOutcome> Join(int64_t after_generation);

  const Assignment& assignment() const { return assignment_; }
  int64_t generation() const { return assignment_.generation; }
  // The newest generation the daemon has announced to this worker.
  int64_t newest_generation() const { return client_->newest_generation(); }

  // Runs `op` on the current generation's communicator. ABORTED without
  // running it when the daemon already aborted this generation, and ABORTED
  // instead of op's own error when that abort is why op failed. A timeout
  // becomes UNAVAILABLE (a peer that stays silent that long is lost), so
  // collective failures are always UNAVAILABLE or ABORTED.
  // FAILED_PRECONDITION without a generation.
  absl::Status RunCollective(CommunicatorOp op) ABSL_LOCKS_EXCLUDED(comm_mu_);

  // Collectives on CUDA tensors: the current generation's NCCL communicator
  // or staging onto the CPU one. Engine thread only (requests on CUDA
  // tensors run there).
  GpuCollectives& gpu() { return *gpu_; }

  // The collective engine every collective goes through (async.h); Join
  // detaches it from the old communicator (failing what is pending with
  // ABORTED) and attaches it to the new one.
  Engine& engine() { return *engine_; }

  // Process sets (process_sets.h). Each added set's members build its ring
  // through the daemon's store under "g<generation><scope>.ps<id>", make
  // its communicator, and run its collectives on an engine of its own; Join
  // drops every set.
  // ProcessSetFor: FAILED_PRECONDITION when this rank is not a member,
  // NOT_FOUND for an unknown id.
  absl::StatusOr<ProcessSetView> ProcessSetFor(int process_set_id) ABSL_LOCKS_EXCLUDED(sets_mu_);
  absl::StatusOr<int> AddProcessSet(std::vector<int> ranks, bool at_init)
      ABSL_LOCKS_EXCLUDED(sets_mu_);
  absl::Status RemoveProcessSet(int process_set_id) ABSL_LOCKS_EXCLUDED(sets_mu_);
  absl::StatusOr<std::vector<int>> ProcessSetRanks(int process_set_id) const
      ABSL_LOCKS_EXCLUDED(sets_mu_);
  std::vector<int> ProcessSetIds() const ABSL_LOCKS_EXCLUDED(sets_mu_);
  // The timeline (horovodd.h): rank 0 opens `path` and hands it to the
  // global engine; other ranks do nothing. Training thread.
  absl::Status StartTimeline(const std::string& path, bool mark_cycles);
  void StopTimeline();

  // RunCollective on a set's communicator (0: the global one).
  absl::Status RunCollective(int process_set_id, CommunicatorOp op) ABSL_LOCKS_EXCLUDED(comm_mu_);

  // Asynchronous; never block the training thread. A failure is not
  // reported when the daemon already announced a newer generation: then it
  // is a consequence of that change, not news.
  void ReportCommit(int64_t commits);
  void ReportFailure(const absl::Status& failure);

 private:
  Runtime(absl::Duration ring_timeout, LocalOptions local, StallOptions stall)
      : ring_timeout_(ring_timeout), local_(local), stall_(stall) {}
  // Attach thread: aborts the communicators of a generation the daemon
  // superseded.
  void OnDaemonMessage(int64_t generation, bool abort) ABSL_LOCKS_EXCLUDED(comm_mu_);
  absl::Status SupersededError(const absl::Status& cause) const;
  void SetCommunicator(std::shared_ptr<Communicator> comm, int64_t generation)
      ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Aborts the global communicator, if any (any thread).
  void AbortCommunicator() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Detaches the engine, aborting a collective it is still running on the
  // current communicator (which is about to be dropped).
  void DetachEngine(const absl::Status& reason);
  // Meets the other ranks in one last barrier (bounded) before the ring closes.
  void SayGoodbye() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Detaches every process set's engine (failing its requests with
  // `reason`) and retires their communicators; the next set added is 1 again.
  void DropProcessSets(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(sets_mu_, comm_mu_);

  // A process set beside the global one.
  struct ProcessSet {
    std::vector<int> ranks;          // job ranks, ascending
    int set_rank = -1;               // -1: this rank is not a member
    std::shared_ptr<Engine> engine;  // members only
  };

  const absl::Duration ring_timeout_;
  const LocalOptions local_;  // its places filled in per generation
  const StallOptions stall_;
  // What this rank is doing (engine_activity.h): its engines record into
  // it, its heartbeats report it; shared with the daemon connection's
  // heartbeat thread, which may outlive the engines.
  const std::shared_ptr<ActivityTracker> activity_ = std::make_shared<ActivityTracker>();
  // "<daemon address>/<job>/<worker id>": whose rings NextRingIncarnation counts.
  std::string worker_key_;
  // The current generation's RingOptions::key_scope (training thread).
  std::string key_scope_;
  std::unique_ptr<DaemonConnection> client_;
  // Declared after client_ so it is destroyed first: its store refers to it.
  std::unique_ptr<GpuCollectives> gpu_;
  // Owned by the training thread.
  Assignment assignment_;
  // The newest generation the daemon aborted (written by the attach thread).
  std::atomic<int64_t> aborted_generation_{0};
  // The training thread replaces the communicators (one per generation and
  // process set), the attach thread aborts them, the engine threads run
  // collectives on copies of the pointers.
  absl::Mutex comm_mu_;
  std::shared_ptr<Communicator> comm_ ABSL_GUARDED_BY(comm_mu_);
  int64_t comm_generation_ ABSL_GUARDED_BY(comm_mu_) = 0;
  // The process sets' communicators (members only), of comm_generation_.
  std::map<int, std::shared_ptr<Communicator>> set_comms_ ABSL_GUARDED_BY(comm_mu_);
  // Process sets: the training thread adds and removes them; any thread
  // making a request looks one up.
  mutable absl::Mutex sets_mu_;
  std::map<int, ProcessSet> sets_ ABSL_GUARDED_BY(sets_mu_);
  int next_set_id_ ABSL_GUARDED_BY(sets_mu_) = 1;
  // The current generation's ring address (training thread), for set rings.
  std::string bind_address_;
  // Each job rank's host in the current generation, where every host's
  // shared memory came up (else empty; the same on every rank), for the
  // sets' own groups (training thread).
  std::vector<int> host_of_rank_;
  // The running timeline, if any (training thread; the engine has a copy).
  std::shared_ptr<Timeline> timeline_;
  // Where replaced communicators go to be torn down.
  CommunicatorReaper reaper_;
  // Declared last, destroyed first: its thread runs collectives through
  // everything above. The destructor detaches it before anything else.
  std::unique_ptr<Engine> engine_;
};

// The runtime the calling thread's collectives use: the one bound to this
// thread, else the process runtime (Init() .. Shutdown()), else null.
Runtime* CurrentRuntime();

// Binds `runtime` to the calling thread while the binding lives, so several
// workers can run as threads of one process (in-process tests).
class ScopedThreadRuntime {
 public:
  explicit ScopedThreadRuntime(Runtime& runtime);
  ~ScopedThreadRuntime();
  ScopedThreadRuntime(const ScopedThreadRuntime&) = delete;
  ScopedThreadRuntime& operator=(const ScopedThreadRuntime&) = delete;

 private:
  Runtime* previous_;
};

// Joins the current runtime's next generation (after its current one). For
// the process runtime: exports HOROVOD_RANK and friends, and if the daemon
// removed this worker, shuts the runtime down and exits the process with
// status 0 (ExitProcess(ExitReason::kRemoved), process_exit.h). A
// thread-bound runtime that is removed, or a process runtime whose exit hook
// returns, gets NOT_FOUND instead.
absl::Status RejoinCurrentRuntime();

}  // namespace horovodd::internal
