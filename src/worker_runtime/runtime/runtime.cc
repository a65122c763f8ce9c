#include "worker_runtime/runtime/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/network_interface.h"
#include "common/status_macros.h"
#include "horovodd/async.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/daemon_client/daemon_kv_store.h"
#include "worker_runtime/daemon_client/process_exit.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/runtime/engine_api.h"
#include "worker_runtime/runtime/environment.h"

namespace horovodd::internal {
namespace {

// How long a runtime that ends waits for its peers in the last barrier (SayGoodbye).
constexpr absl::Duration kGoodbyeTimeout = absl::Seconds(3);

Assignment ToAssignment(const v1::RendezvousResponse& response) {
  Assignment a;
  a.generation = response.generation();
  a.rank = response.rank();
  a.size = response.size();
  a.local_rank = response.local_rank();
  a.local_size = response.local_size();
  a.cross_rank = response.cross_rank();
  a.cross_size = response.cross_size();
  a.shrink.from_generation = response.shrinks_generation();
  a.shrink.excluded_ranks.assign(response.excluded_ranks().begin(),
                                 response.excluded_ranks().end());
  return a;
}

absl::Status CheckAssignment(const v1::RendezvousResponse& response, int64_t after) {
  if (response.generation() <= after || response.size() < 1 || response.rank() < 0 ||
      response.rank() >= response.size()) {
    return absl::InternalError(absl::StrCat(
        "the daemon answered a rendezvous after generation ", after, " with generation ",
        response.generation(), ", rank ", response.rank(), " of size ", response.size()));
  }
  return absl::OkStatus();
}

// How many global rings each worker of this process has built per
// generation, kept across runtimes: after Shutdown() and Init() a process
// joins the same generation again, and its ranks must not meet under the
// keys (the addresses) of the ring they just closed. Every rank of the
// generation counts the same, since every rank re-inits alike; a new
// generation starts again from 1.
int NextRingIncarnation(const std::string& worker, int64_t generation) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* const built = new std::map<std::string, std::pair<int64_t, int>>();
  absl::MutexLock lock(&mu);
  std::pair<int64_t, int>& entry = (*built)[worker];
  if (entry.first != generation) entry = {generation, 0};
  return ++entry.second;
}

// "" for a generation's first ring, ".i<n>" for the n-th.
std::string IncarnationScope(int incarnation) {
  return incarnation <= 1 ? std::string() : absl::StrCat(".i", incarnation);
}

// A reported collective's name is cut to this (the daemon takes up to 1 KiB).
constexpr size_t kMaxReportedNameBytes = 512;

// `text` cut to at most `max_bytes`, never inside a UTF-8 character.
std::string CutUtf8(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// The heartbeat's report of what `tracker` saw, at `now`.
v1::WorkerActivity ActivityReport(const ActivityTracker& tracker, absl::Time now) {
  const ActivitySnapshot snapshot = tracker.Snapshot();
  v1::WorkerActivity report;
  if (snapshot.waiting.has_value()) {
    v1::CollectiveWait* wait = report.mutable_waiting();
    wait->set_name(CutUtf8(snapshot.waiting->name, kMaxReportedNameBytes));
    wait->set_operation(snapshot.waiting->operation);
    wait->set_process_set(snapshot.waiting->process_set);
    wait->set_waited_seconds(std::max(0.0, absl::ToDoubleSeconds(now - snapshot.waiting->since)));
    if (snapshot.waiting_on.has_value()) {
      report.add_waiting_on_ranks(snapshot.waiting_on->rank);
      report.set_waiting_on_seconds(
          std::max(0.0, absl::ToDoubleSeconds(now - snapshot.waiting_on->since)));
    }
  }
  report.set_pending(snapshot.pending);
  report.set_completed(snapshot.completed);
  report.set_last_commit(snapshot.last_commit);
  if (snapshot.step > absl::ZeroDuration()) {
    report.set_step_seconds(absl::ToDoubleSeconds(snapshot.step));
    report.set_steps_per_second(1.0 / absl::ToDoubleSeconds(snapshot.step));
    report.set_step_wait_seconds(absl::ToDoubleSeconds(snapshot.step_wait));
  }
  report.set_since_commit_seconds(
      snapshot.last_commit_at.has_value()
          ? std::max(0.0, absl::ToDoubleSeconds(now - *snapshot.last_commit_at))
          : -1);
  return report;
}

}  // namespace

// ---------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options) {
  // Debian's Abseil is built with Mutex deadlock detection on: it records
  // every lock order in a global graph (gRPC locks absl::Mutex on each call),
  // costly on every collective and RPC. It is a debugging aid; off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<Runtime> runtime(new Runtime(options.ring_timeout, options.local, options.stall));
  // The daemon's address too: processes that host several daemons' workers in
  // turn (the in-process tests) count each daemon's rings apart.
  runtime->worker_key_ = absl::StrCat(options.daemon.address, "/", options.daemon.job_id, "/",
                                      options.daemon.worker_id);
  Runtime* self = runtime.get();
  GpuCollectivesOptions gpu;
  gpu.operations = options.gpu_operations;
  gpu.timeout = options.ring_timeout;
  gpu.cpu = [self](CommunicatorOp op) { return self->RunCollective(op); };
  runtime->gpu_ = std::make_unique<GpuCollectives>(std::move(gpu));
  DaemonClientOptions daemon = std::move(options.daemon);
  daemon.on_message = [self](int64_t generation, bool abort) {
    self->OnDaemonMessage(generation, abort);
  };
  daemon.activity = [tracker = runtime->activity_] {
    return ActivityReport(*tracker, absl::Now());
  };
  if (options.connect_daemon) {
    HVDD_ASSIGN_OR_RETURN(runtime->client_, options.connect_daemon(std::move(daemon)));
  } else {
    HVDD_ASSIGN_OR_RETURN(runtime->client_, DaemonClient::Create(std::move(daemon)));
  }
  runtime->engine_ =
      std::make_unique<Engine>(options.engine, options.stall, ActivitySink{runtime->activity_, 0});
  runtime->client_->StartAttach();
  return runtime;
}

Runtime::~Runtime() {
  SayGoodbye();
  StopTimeline();
  DropProcessSets(absl::AbortedError("the worker runtime is shutting down"));
  // The engine first: its thread runs collectives on the communicators.
  DetachEngine(absl::AbortedError("the worker runtime is shutting down"));
  engine_.reset();
  // Then the client: its threads call back into this object.
  if (client_ != nullptr) client_->Stop();
  SetCommunicator(nullptr, 0);
}

void Runtime::SetCommunicator(std::shared_ptr<Communicator> comm, int64_t generation) {
  std::shared_ptr<Communicator> old;
  {
    absl::MutexLock lock(&comm_mu_);
    old = std::move(comm_);
    comm_ = std::move(comm);
    comm_generation_ = generation;
  }
  reaper_.Retire(std::move(old));
}

void Runtime::AbortCommunicator() {
  absl::MutexLock lock(&comm_mu_);
  if (comm_ != nullptr) comm_->Abort();
}

// A rank that closes its ring while a peer still reads the last collective
// they shared can break that read: a TCP connection closed with bytes still
// unread on it (a peer announcing its next receive) is reset, and the reset
// throws away what the peer had not read yet -- the peer's last collective
// fails at the very end of the job. So a runtime that ends with a ring meets
// its peers in one more barrier first; ranks ending together pass it at once,
// and after it every rank's real work is done. A rank ending alone (its peers
// train on, or are gone) gives up after kGoodbyeTimeout and closes as before;
// the barrier's own failure changes nothing.
void Runtime::SayGoodbye() {
  {
    absl::MutexLock lock(&comm_mu_);
    if (comm_ == nullptr) return;
  }
  if (engine_ == nullptr) return;
  absl::StatusOr<Handle> goodbye = EnqueueOpaque(
      *this, SyncName("goodbye", ""), "goodbye", /*tensors=*/{},
      [this](std::optional<Tensor>*) {
        return RunCollective([](Communicator& comm) { return comm.Barrier(); });
      },
      /*urgent=*/true);
  if (goodbye.ok()) goodbye->Wait(kGoodbyeTimeout).IgnoreError();
}

void Runtime::DetachEngine(const absl::Status& reason) {
  if (engine_ == nullptr) return;
  const int64_t generation = assignment_.generation;
  engine_->Detach(reason, [this, generation] {
    gpu_->Abort(generation + 1);
    AbortCommunicator();
  });
}

namespace {

double RealtimeNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

absl::Mutex join_times_mu(absl::kConstInit);
JoinTimes last_join_times ABSL_GUARDED_BY(join_times_mu);

}  // namespace

JoinTimes LastJoinTimes() {
  absl::MutexLock lock(&join_times_mu);
  return last_join_times;
}

absl::StatusOr<JoinOutcome> Runtime::Join(int64_t after_generation) {
  JoinTimes times;
  times.began = RealtimeNow();
  // Whatever is still pending belongs to the generation being left.
  DetachEngine(absl::AbortedError(absl::StrCat("this worker is leaving generation ",
                                               assignment_.generation, " to rejoin the job")));
  // After a reset only the global set exists, as in Horovod.
  DropProcessSets(absl::AbortedError(absl::StrCat("this worker is leaving generation ",
                                                  assignment_.generation, " to rejoin the job")));
  SetCommunicator(nullptr, 0);  // a communicator is never reused across generations
  // nor an NCCL communicator, though the next generation may shrink it
  gpu_->LeaveGeneration();
  times.asked = RealtimeNow();
  int64_t after = after_generation;
  while (true) {
    HVDD_ASSIGN_OR_RETURN(const v1::RendezvousResponse response, client_->Rendezvous(after));
    if (response.removed()) return JoinOutcome::kRemoved;
    times.answered = RealtimeNow();
    HVDD_RETURN_IF_ERROR(CheckAssignment(response, after));
    Assignment next = ToAssignment(response);
    client_->set_current_generation(next.generation);

    RingOptions ring_options;
    ring_options.generation = next.generation;
    ring_options.rank = next.rank;
    ring_options.size = next.size;
    ring_options.bind_address =
        response.bind_address().empty() ? std::string("127.0.0.1") : response.bind_address();
    // The Slurm launcher knows this node's address better than its name does (NodeAddr).
    if (const std::string node_address = OptionalEnv("HOROVODD_NODE_ADDR"); !node_address.empty()) {
      ring_options.bind_address = node_address;
    }
    // --network-interface: bind to that interface's address on this host.
    if (const std::string interface = OptionalEnv("HOROVODD_NETWORK_INTERFACE");
        !interface.empty()) {
      HVDD_ASSIGN_OR_RETURN(ring_options.bind_address, InterfaceIPv4Address(interface));
    }
    ring_options.timeout = ring_timeout_;
    // One host's ranks, sharing its memory: the ring carries no collective
    // but Adasum (comm_factory.h), so no pair is connected before one does.
    // From the daemon's answer, the same on every rank (HOROVODD_SHM may
    // not be): a rank connecting its first pairs waits for its neighbours'.
    ring_options.eager_pairs = next.local_size != next.size;
    ring_options.key_scope = IncarnationScope(NextRingIncarnation(worker_key_, next.generation));
    RingResult result = ConnectRingThroughDaemon(*client_, ring_options);
    std::vector<int> host_of_rank;
    std::shared_ptr<Communicator> comm;
    if (result.ring.ok()) {
      times.ring_connected = RealtimeNow();
      // The generation's communicator, from where its ranks are, before the
      // ring's first collective.
      LocalOptions local = local_;
      local.local_rank = next.local_rank;
      local.local_size = next.local_size;
      local.cross_rank = next.cross_rank;
      // The global ring's ranks are the job's: its receives say whom they wait for.
      (*result.ring)->set_peer_wait(activity_->peer_wait());
      auto ring = std::make_shared<GlooCommunicator>(*std::move(result.ring));
      absl::StatusOr<std::shared_ptr<Communicator>> chosen =
          ConnectCommunicator(ring, local, &host_of_rank);
      if (chosen.ok()) {
        comm = *std::move(chosen);
      } else {
        reaper_.Retire(std::move(ring));
        result.ring = chosen.status();
        result.superseded = client_->newest_generation() > next.generation;
      }
    }
    if (result.ring.ok()) {
      times.communicator_ready = RealtimeNow();
      {
        absl::MutexLock lock(&join_times_mu);
        last_join_times = times;
      }
      assignment_ = std::move(next);
      key_scope_ = ring_options.key_scope;
      bind_address_ = ring_options.bind_address;
      host_of_rank_ = std::move(host_of_rank);
      SetCommunicator(std::move(comm), assignment_.generation);
      activity_->NewGeneration();
      // The NCCL unique id too: a re-init must not read the last one's.
      gpu_->EnterGeneration(
          assignment_.generation, assignment_.rank, assignment_.size, assignment_.shrink,
          std::make_unique<DaemonKvStore>(*client_, assignment_.generation,
                                          key_scope_.empty() ? "" : key_scope_ + "/"));
      engine_->Attach(
          assignment_.generation, [this](CommunicatorOp op) { return RunCollective(op); },
          [this] { AbortCommunicator(); });
      return JoinOutcome::kJoined;
    }
    // A ring of a superseded generation was bound to fail; anything else is
    // news the daemon needs to plan the next generation.
    if (!result.superseded && client_->newest_generation() <= next.generation) {
      client_->ReportFailure(next.generation, result.ring.status().ToString());
    }
    after = next.generation;
  }
}

absl::Status Runtime::SupersededError(const absl::Status& cause) const {
  std::string message = absl::StrCat("the daemon aborted generation ", generation(),
                                     " (generation ", aborted_generation_.load(), " replaces it)");
  if (!cause.ok()) absl::StrAppend(&message, " (", cause.message(), ")");
  return absl::AbortedError(message);
}

absl::Status Runtime::RunCollective(CommunicatorOp op) { return RunCollective(0, op); }

absl::Status Runtime::RunCollective(int process_set_id, CommunicatorOp op) {
  std::shared_ptr<Communicator> comm;
  int64_t comm_generation = 0;
  {
    absl::MutexLock lock(&comm_mu_);
    if (process_set_id == 0) {
      comm = comm_;
    } else if (auto it = set_comms_.find(process_set_id); it != set_comms_.end()) {
      comm = it->second;
    } else {
      return absl::AbortedError(absl::StrCat("process set ", process_set_id, " was removed"));
    }
    comm_generation = comm_generation_;
  }
  if (comm == nullptr) {
    return absl::FailedPreconditionError(
        "this worker has no ring: it is not a member of any generation yet");
  }
  if (aborted_generation_.load() > comm_generation) return SupersededError(absl::OkStatus());
  absl::Status status = op(*comm);
  if (status.ok()) return status;
  if (aborted_generation_.load() > comm_generation) return SupersededError(status);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::UnavailableError(
        absl::StrCat("a peer stayed silent past the ring timeout: ", status.message()));
  }
  return status;
}

absl::Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return absl::InvalidArgumentError("start_timeline needs a file name");
  if (assignment_.rank != 0) return absl::OkStatus();  // rank 0 writes it, as in Horovod
  HVDD_ASSIGN_OR_RETURN(std::unique_ptr<Timeline> opened, Timeline::Open(path, mark_cycles));
  StopTimeline();
  timeline_ = std::move(opened);
  engine_->set_timeline(timeline_);
  return absl::OkStatus();
}

void Runtime::StopTimeline() {
  if (timeline_ == nullptr) return;
  engine_->set_timeline(nullptr);
  timeline_->Stop();
  timeline_.reset();
}

void Runtime::OnDaemonMessage(int64_t generation, bool abort) {
  if (!abort) return;
  int64_t aborted = aborted_generation_.load();
  while (generation > aborted && !aborted_generation_.compare_exchange_weak(aborted, generation)) {
  }
  // Set before the communicators are looked at: a collective that starts
  // after this sees the abort in RunCollective, one already running is woken
  // here. An NCCL op in flight sees it at its next poll.
  gpu_->Abort(generation);
  absl::MutexLock lock(&comm_mu_);
  if (comm_ != nullptr && generation > comm_generation_) {
    comm_->Abort();
    for (auto& [id, comm] : set_comms_) comm->Abort();
  }
}

void Runtime::ReportCommit(int64_t commits) {
  activity_->Committed(commits, absl::Now());
  client_->ReportCommit(generation(), commits);
}

void Runtime::ReportFailure(const absl::Status& failure) {
  if (newest_generation() > generation()) return;
  client_->ReportFailure(generation(), failure.ToString());
}

// ---------------------------------------------------------------------------
// Process and thread bindings
// ---------------------------------------------------------------------------

namespace {

// Init() and Shutdown() hold g_process_mu; everything else only reads the
// pointer (from the training thread, per horovodd.h's contract).
ABSL_CONST_INIT absl::Mutex g_process_mu(absl::kConstInit);
std::unique_ptr<Runtime> g_process_owner ABSL_GUARDED_BY(g_process_mu);
std::atomic<Runtime*> g_process_runtime{nullptr};
thread_local Runtime* t_bound_runtime = nullptr;

void ExportEnvironment(const Assignment& a) {
  const std::pair<const char*, int> values[] = {
      {"HOROVOD_RANK", a.rank},
      {"HOROVOD_SIZE", a.size},
      {"HOROVOD_LOCAL_RANK", a.local_rank},
      {"HOROVOD_LOCAL_SIZE", a.local_size},
      {"HOROVOD_CROSS_RANK", a.cross_rank},
      {"HOROVOD_CROSS_SIZE", a.cross_size},
  };
  for (const auto& [name, value] : values) {
    setenv(name, std::to_string(value).c_str(), /*overwrite=*/1);
  }
}

// Returns only if a test replaced the exit hook: the caller then answers
// NOT_FOUND, as a thread-bound runtime does.
absl::Status ExitAsRemoved() {
  horovodd::Shutdown();
  HVDD_LOG(INFO) << "horovodd: worker removed from the job, exiting";
  ExitProcess(ExitReason::kRemoved);
  return absl::NotFoundError("the daemon removed this worker from the job");
}

}  // namespace

Runtime* CurrentRuntime() {
  return t_bound_runtime != nullptr ? t_bound_runtime : g_process_runtime.load();
}

ScopedThreadRuntime::ScopedThreadRuntime(Runtime& runtime) : previous_(t_bound_runtime) {
  t_bound_runtime = &runtime;
}

ScopedThreadRuntime::~ScopedThreadRuntime() { t_bound_runtime = previous_; }

absl::Status RejoinCurrentRuntime() {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) {
    return absl::FailedPreconditionError("horovodd::Init() has not been called");
  }
  const bool is_process = runtime == g_process_runtime.load() && t_bound_runtime == nullptr;
  HVDD_ASSIGN_OR_RETURN(const JoinOutcome outcome, runtime->Join(runtime->generation()));
  if (outcome == JoinOutcome::kRemoved) {
    if (is_process) return ExitAsRemoved();
    return absl::NotFoundError("the daemon removed this worker from the job");
  }
  if (is_process) ExportEnvironment(runtime->assignment());
  return absl::OkStatus();
}

}  // namespace horovodd::internal

// ---------------------------------------------------------------------------
// The public API (horovodd.h): membership, over the current runtime. The
// collectives are in engine_sync.cc (they go through the engine).
// ---------------------------------------------------------------------------

namespace horovodd {
namespace {

using internal::CurrentRuntime;
using internal::Runtime;

template <typename Pick>
int AssignmentField(Pick pick, int when_not_initialized) {
  Runtime* runtime = CurrentRuntime();
  return runtime == nullptr ? when_not_initialized : pick(runtime->assignment());
}

}  // namespace

absl::Status Init() {
  absl::ReleasableMutexLock lock(&internal::g_process_mu);
  if (internal::g_process_owner != nullptr) return absl::OkStatus();
  HVDD_ASSIGN_OR_RETURN(internal::RuntimeOptions options,
                        internal::RuntimeOptions::FromEnvironment());
  HVDD_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(std::move(options)));
  HVDD_ASSIGN_OR_RETURN(const internal::JoinOutcome outcome, runtime->Join(0));
  if (outcome == internal::JoinOutcome::kRemoved) {
    runtime.reset();
    lock.Release();
    return internal::ExitAsRemoved();
  }
  internal::ExportEnvironment(runtime->assignment());
  if (const std::string timeline = internal::OptionalEnv("HOROVOD_TIMELINE"); !timeline.empty()) {
    const std::string marks = internal::OptionalEnv("HOROVOD_TIMELINE_MARK_CYCLES");
    HVDD_RETURN_IF_ERROR(
        runtime->StartTimeline(timeline, !marks.empty() && marks != "0" && marks != "false"));
  }
  internal::g_process_owner = std::move(runtime);
  internal::g_process_runtime = internal::g_process_owner.get();
  return absl::OkStatus();
}

void Shutdown() {
  std::unique_ptr<Runtime> owned;
  {
    absl::MutexLock lock(&internal::g_process_mu);
    internal::g_process_runtime = nullptr;
    owned = std::move(internal::g_process_owner);
  }
  // Destroyed outside the lock: it flushes reports and joins threads.
}

bool IsInitialized() { return CurrentRuntime() != nullptr; }

absl::Status StartTimeline(const std::string& path, bool mark_cycles) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) {
    return absl::FailedPreconditionError("StartTimeline needs horovodd::Init() first");
  }
  return runtime->StartTimeline(path, mark_cycles);
}

absl::Status StopTimeline() {
  Runtime* runtime = CurrentRuntime();
  if (runtime != nullptr) runtime->StopTimeline();
  return absl::OkStatus();
}

int Rank() {
  return AssignmentField([](const internal::Assignment& a) { return a.rank; }, -1);
}
int Size() {
  return AssignmentField([](const internal::Assignment& a) { return a.size; }, 0);
}
int LocalRank() {
  return AssignmentField([](const internal::Assignment& a) { return a.local_rank; }, -1);
}
int LocalSize() {
  return AssignmentField([](const internal::Assignment& a) { return a.local_size; }, 0);
}
int CrossRank() {
  return AssignmentField([](const internal::Assignment& a) { return a.cross_rank; }, -1);
}
int CrossSize() {
  return AssignmentField([](const internal::Assignment& a) { return a.cross_size; }, 0);
}
int64_t Generation() {
  Runtime* runtime = CurrentRuntime();
  return runtime == nullptr ? 0 : runtime->generation();
}

}  // namespace horovodd
