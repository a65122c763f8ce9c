// The engine: one background thread per runtime (and per process set) that
// runs the collectives of its communicator while it is attached. The training thread (and any
// other) enqueues named requests; a round negotiates which are ready on every rank
// (engine_negotiation.h), runs them fused (engine_fusion.h) and completes their handles.
//
// Who runs a round: one thread at a time, marked by in_round_. Usually the
// engine thread; but a thread that waits without a deadline on a pending
// handle (a synchronous call, Synchronize) runs the round itself when the
// engine thread is not in one, so a blocking call costs no hand-off to the
// engine thread and back (each a wake-up that, on a loaded machine, waits
// for a core). Who owns what:
//   - under mu() (the Signals' mutex, shared with handles): the incoming
//     queue, names pending, the communicator's runner, whether the engine is
//     attached to a generation, options, in_round_;
//   - the thread running the round (in_round_ set) only: requests taken
//     into negotiation, the response cache, the predictor, the fusion
//     buffer, last_round_*.
//
// Generations: Attach() hands the engine a way to a generation's
// communicator (comm/communicator.h); Detach() ends it: every pending handle
// fails with the given reason (ABORTED), the cache is cleared, and Detach
// returns once the engine thread no longer touches the communicator. A
// collective that fails (lost peer, daemon abort) fails its own handles with
// its error and every other pending one with ABORTED; requests are refused
// with ABORTED until the next Attach. Either way the stall check forgets what
// waited: nothing of an ended ring is reported as stalled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "horovodd/async.h"
#include "worker_runtime/engine/engine_activity.h"
#include "worker_runtime/engine/engine_fusion.h"
#include "worker_runtime/engine/engine_negotiation.h"
#include "worker_runtime/engine/engine_request.h"
#include "worker_runtime/engine/engine_speculation.h"
#include "worker_runtime/engine/engine_timeline.h"

namespace horovodd::internal {

// Where an engine reports the collectives it has pending (engine_activity.h);
// a null tracker: nowhere.
struct ActivitySink {
  std::shared_ptr<ActivityTracker> tracker;
  int process_set = 0;  // the engine's set: 0, the global one
};

class Engine {
 public:
  // `stall`: Horovod's stall check (engine_stall.h), on a thread of its own
  // when enabled. `activity`: told of every request queued and completed.
  explicit Engine(EngineOptions options, StallOptions stall = StallOptions{},
                  ActivitySink activity = ActivitySink{});
  // Fails whatever is still pending (ABORTED) and joins the thread. Call
  // Detach first when a communicator is attached, so a collective in flight
  // can be aborted rather than waited out.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  EngineOptions options() const ABSL_LOCKS_EXCLUDED(mu());
  void set_options(const EngineOptions& options) ABSL_LOCKS_EXCLUDED(mu());

  // Starts serving `generation` on the communicator `comm` runs ops on. The
  // engine must be detached. `abort` (may be empty) wakes a collective
  // blocked on the communicator: the stall check's shutdown uses it.
  void Attach(int64_t generation, CommunicatorRunner comm, std::function<void()> abort = {})
      ABSL_LOCKS_EXCLUDED(mu());
  // Ends the current generation (see above). `abort` (may be empty) is
  // called when the engine thread is inside a collective, to wake it.
  void Detach(const absl::Status& reason, const std::function<void()>& abort)
      ABSL_LOCKS_EXCLUDED(mu());

  // Queues a request whose fields (but not its handle) are set and checked.
  // `urgent`: the caller waits on it at once (a synchronous call) and so runs
  // the round itself (or, when it cannot, wakes the engine thread as it
  // blocks): the engine thread is not woken for it. Errors:
  // INVALID_ARGUMENT when its name is already pending on this rank; the
  // engine's reason when it is not attached or its communicator failed.
  absl::StatusOr<Handle> Enqueue(Request request, bool urgent) ABSL_LOCKS_EXCLUDED(mu());

  // Records what happens to each request from now on (null: stop). The
  // caller Stop()s a timeline it replaces.
  void set_timeline(std::shared_ptr<Timeline> timeline) ABSL_LOCKS_EXCLUDED(mu());

  // Rounds whose speculative allreduce (engine_speculation.h) the
  // negotiation confirmed, since the engine started.
  int64_t confirmed_predictions() const { return confirmed_predictions_.load(); }

 private:
  // Shared with handles, so a waiter can hurry the engine even while the
  // engine is being destroyed.
  struct Signals {
    absl::Mutex mu;
    absl::CondVar wake;
    bool urgent ABSL_GUARDED_BY(mu) = false;  // a synchronous call was enqueued
    int waiters ABSL_GUARDED_BY(mu) = 0;      // threads blocked on a pending handle
    // Null once the engine is being destroyed. Lets a waiter drive rounds
    // (Drive) for as long as the engine lives.
    Engine* engine ABSL_GUARDED_BY(mu) = nullptr;
  };
  // A request this rank runs on zeros because it joined (engine_negotiation.h).
  struct StandIn {
    static absl::StatusOr<StandIn> Zeros(const std::string& name, const std::string& descriptor);
    Request request;
    std::vector<Tensor> zeros;  // request.tensors view these
  };
  struct Completion {
    std::shared_ptr<HandleState> handle;
    std::string error_prefix;
    absl::Status status;
    std::optional<Tensor> output;
  };

  // Runs rounds on the calling thread (which waits, without a deadline, on
  // `handle`) until it completes, or until a round cannot start here now:
  // another thread runs one, a detach or stop is pending, or nothing new
  // happened since the last round (retries of requests that were not ready
  // are the engine thread's, paced by the cycle time).
  static void Drive(const std::shared_ptr<Signals>& signals, const HandleState& handle);
  // Whether a waiter may start a round now (see Drive).
  bool CanDriveRound() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu());
  // Takes the incoming requests into a round, runs it with mu() released
  // and relocks; in_round_ is set for its duration.
  void RunRoundLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu());
  void Loop() ABSL_LOCKS_EXCLUDED(mu());
  // Waits (holding mu()) until there is a round to run, a detach or a
  // stop, and no waiter is running a round. Returns false to stop.
  bool WaitForWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu());
  void RunRound(CommunicatorRunner comm, int64_t fusion_threshold) ABSL_LOCKS_EXCLUDED(mu());
  // Runs the round's ready requests; returns the communicator's failure, if
  // any.
  absl::Status RunReady(const NegotiationResult& round, const CommunicatorRunner& comm,
                        std::vector<Completion>& done);
  void FailEverything(const absl::Status& reason, std::vector<Completion>& done)
      ABSL_LOCKS_EXCLUDED(mu());
  // Releases the names, then completes the handles.
  void Finish(std::vector<Completion>& done) ABSL_LOCKS_EXCLUDED(mu());
  absl::Status RingFailure(const absl::Status& cause) const ABSL_LOCKS_EXCLUDED(mu());
  // The last rank whose join was seen (joined_at_round_).
  int LastToJoin() const;
  // The stall thread: checks every so often; on a shutdown verdict fails
  // what is pending with its reason (waking a round blocked in a collective).
  void StallLoop() ABSL_LOCKS_EXCLUDED(mu(), stall_mu_);

  // The engine's lock is the Signals' mutex, so that handles can reach it
  // after the engine is gone.
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(signals_->mu) { return signals_->mu; }

  const std::shared_ptr<Signals> signals_ = std::make_shared<Signals>();

  EngineOptions options_ ABSL_GUARDED_BY(signals_->mu);
  std::shared_ptr<Timeline> timeline_ ABSL_GUARDED_BY(signals_->mu);
  bool stop_ ABSL_GUARDED_BY(signals_->mu) = false;
  bool detach_requested_ ABSL_GUARDED_BY(signals_->mu) = false;
  absl::Status detach_reason_ ABSL_GUARDED_BY(signals_->mu);
  absl::CondVar detached_;  // signalled when detach_requested_ clears
  bool in_round_ ABSL_GUARDED_BY(signals_->mu) = false;
  bool attached_ ABSL_GUARDED_BY(signals_->mu) = false;
  std::function<void()> abort_ ABSL_GUARDED_BY(signals_->mu);
  // Set once the stall check shut the engine down: why (RingFailure's answer).
  absl::Status stall_failure_ ABSL_GUARDED_BY(signals_->mu);
  int64_t generation_ ABSL_GUARDED_BY(signals_->mu) = 0;
  CommunicatorRunner comm_ ABSL_GUARDED_BY(signals_->mu);
  // Why requests are refused now (OK: they are not).
  absl::Status refusal_ ABSL_GUARDED_BY(signals_->mu);
  std::vector<Request> incoming_ ABSL_GUARDED_BY(signals_->mu);
  absl::Time first_incoming_ ABSL_GUARDED_BY(signals_->mu) = absl::InfinitePast();
  // incoming_ and taken_.
  std::unordered_set<std::string> pending_names_ ABSL_GUARDED_BY(signals_->mu);

  // The thread running the round only (see above).
  std::vector<Request> taken_;                // in negotiation, in enqueue order
  std::shared_ptr<Timeline> round_timeline_;  // timeline_ when the round began
  ResponseCache cache_;
  AllreducePredictor predictor_;                   // engine_speculation.h
  std::atomic<int64_t> confirmed_predictions_{0};  // any thread may read
  FusionBuffer fusion_;
  // Which round each rank's pending join was first seen in (for the last
  // rank to join); identical on every rank. Cleared when the joins complete.
  std::map<int, int64_t> joined_at_round_;
  int64_t rounds_ = 0;  // negotiated rounds on this communicator
  absl::Time last_round_ = absl::InfinitePast();
  bool last_round_progressed_ = false;  // something completed in it

  StallInspector stall_;
  const ActivitySink activity_;
  absl::Mutex stall_mu_;
  bool stall_stop_ ABSL_GUARDED_BY(stall_mu_) = false;

  std::thread thread_;  // last: start after everything above exists
  std::thread stall_thread_;
};

}  // namespace horovodd::internal
