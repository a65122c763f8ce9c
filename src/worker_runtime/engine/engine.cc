#include "worker_runtime/engine/engine.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace horovodd::internal {
namespace {

absl::Status NotAMember() {
  return absl::FailedPreconditionError(
      "this worker has no ring: it is not a member of any generation yet");
}

// The same code, with the request's prefix in front.
absl::Status ForRequest(const Request& request, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(request.error_prefix, status.message()));
}

}  // namespace

Engine::Engine(EngineOptions options, StallOptions stall, ActivitySink activity)
    : options_(std::move(options)),
      refusal_(NotAMember()),
      stall_(stall),
      activity_(std::move(activity)) {
  {
    absl::MutexLock lock(&mu());
    signals_->engine = this;
  }
  thread_ = std::thread([this] { Loop(); });
  if (stall_.options().enabled) stall_thread_ = std::thread([this] { StallLoop(); });
}

Engine::~Engine() {
  if (stall_thread_.joinable()) {
    {
      absl::MutexLock lock(&stall_mu_);
      stall_stop_ = true;
    }
    stall_thread_.join();
  }
  {
    absl::MutexLock lock(&mu());
    stop_ = true;
    signals_->engine = nullptr;  // no waiter starts a round from now on
  }
  signals_->wake.SignalAll();
  thread_.join();
}

void Engine::StallLoop() {
  // Often enough that a warning comes soon after the check time.
  const absl::Duration period =
      std::clamp(stall_.options().check_time / 4, absl::Milliseconds(50), absl::Seconds(1));
  while (true) {
    {
      absl::MutexLock lock(&stall_mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stall_mu_) { return stall_stop_; };
      if (stall_mu_.AwaitWithTimeout(absl::Condition(&stopping), period)) return;
    }
    const StallInspector::Verdict verdict = stall_.Check(absl::Now());
    if (!verdict.warning.empty()) {
      HVDD_LOG(WARNING) << "horovodd: stall check: " << verdict.warning;
    }
    if (verdict.shutdown.empty()) continue;
    HVDD_LOG(ERROR) << "horovodd: " << verdict.shutdown;
    std::function<void()> abort;
    {
      absl::MutexLock lock(&mu());
      if (!stall_failure_.ok()) continue;
      stall_failure_ = absl::DeadlineExceededError(verdict.shutdown);
      abort = abort_;
    }
    signals_->wake.SignalAll();
    // Wakes the round blocked on the missing ranks; it fails with the reason.
    if (abort) abort();
  }
}

EngineOptions Engine::options() const {
  absl::MutexLock lock(&mu());
  return options_;
}

void Engine::set_options(const EngineOptions& options) {
  {
    absl::MutexLock lock(&mu());
    options_ = options;
  }
  signals_->wake.SignalAll();
}

void Engine::set_timeline(std::shared_ptr<Timeline> timeline) {
  absl::MutexLock lock(&mu());
  timeline_ = std::move(timeline);
}

void Engine::Attach(int64_t generation, CommunicatorRunner comm, std::function<void()> abort) {
  {
    absl::MutexLock lock(&mu());
    attached_ = true;
    generation_ = generation;
    comm_ = std::move(comm);
    abort_ = std::move(abort);
    refusal_ = absl::OkStatus();
    stall_failure_ = absl::OkStatus();
  }
  stall_.Reset();
  signals_->wake.SignalAll();
}

void Engine::Detach(const absl::Status& reason, const std::function<void()>& abort) {
  mu().Lock();
  detach_requested_ = true;
  detach_reason_ = reason;
  signals_->wake.SignalAll();
  // The engine thread starts no round once detach_requested_ is set, so
  // only a round already running needs waking.
  if (in_round_ && abort) {
    mu().Unlock();
    abort();
    mu().Lock();
  }
  while (detach_requested_) detached_.Wait(&mu());
  mu().Unlock();
}

absl::StatusOr<Handle> Engine::Enqueue(Request request, bool urgent) {
  absl::ReleasableMutexLock lock(&mu());
  if (!refusal_.ok()) return ForRequest(request, refusal_);
  if (!pending_names_.insert(request.name).second) {
    // Horovod's words (its duplicate-name error), then ours.
    return absl::InvalidArgumentError(absl::StrCat(
        "Requested a collective on a tensor with the same name as another tensor that is "
        "currently being processed: a collective named '",
        request.name,
        "' is already pending on this rank; synchronize it before reusing the name, or use a "
        "different tensor name"));
  }
  std::weak_ptr<Signals> signals = signals_;
  request.handle = std::make_shared<HandleState>(
      request.name, request.produces_output,
      [signals](bool waiting) {
        if (std::shared_ptr<Signals> s = signals.lock()) {
          {
            absl::MutexLock lock(&s->mu);
            s->waiters += waiting ? 1 : -1;
          }
          if (waiting) s->wake.SignalAll();
        }
      },
      [signals](const HandleState& state) {
        if (std::shared_ptr<Signals> s = signals.lock()) Drive(s, state);
      });
  Handle handle = HandleState::MakeHandle(request.handle);
  if (timeline_ != nullptr) timeline_->NegotiateStart(request.name, TimelineOperationOf(request));
  if (activity_.tracker != nullptr) {
    activity_.tracker->Submitted(activity_.process_set, request.name, ActivityOperationOf(request),
                                 absl::Now());
  }
  const bool first = incoming_.empty();
  if (first) first_incoming_ = absl::Now();
  incoming_.push_back(std::move(request));
  if (urgent) {
    // The caller runs the round as it waits; waking the engine thread too
    // would only race it for the round (and cost a wake-up).
    signals_->urgent = true;
    return handle;
  }
  // The engine thread's timer runs from the first request of a batch; the
  // next ones (a backward pass enqueues one per gradient) need not wake it,
  // unless someone already waits and it should start at once.
  const bool wake = first || signals_->waiters > 0;
  lock.Release();
  if (wake) signals_->wake.SignalAll();
  return handle;
}

void Engine::Drive(const std::shared_ptr<Signals>& signals, const HandleState& handle) {
  absl::MutexLock lock(&signals->mu);
  // signals->engine is re-read under the lock each time: once the destructor
  // cleared it, the engine may be gone as soon as in_round_ is clear.
  while (signals->engine != nullptr && !handle.done()) {
    Engine& engine = *signals->engine;
    engine.mu().AssertHeld();  // it is signals->mu, by another name
    if (!engine.CanDriveRound()) return;
    engine.RunRoundLocked();
  }
}

bool Engine::CanDriveRound() const {
  if (stop_ || detach_requested_ || in_round_ || !attached_ || !refusal_.ok()) return false;
  return !incoming_.empty() || last_round_progressed_;
}

void Engine::RunRoundLocked() {
  for (Request& r : incoming_) taken_.push_back(std::move(r));
  incoming_.clear();
  signals_->urgent = false;
  in_round_ = true;
  CommunicatorRunner comm = comm_;
  const int64_t threshold = options_.fusion_threshold_bytes;
  last_round_ = absl::Now();
  round_timeline_ = timeline_;
  mu().Unlock();
  RunRound(std::move(comm), threshold);
  mu().Lock();
  in_round_ = false;
  // The engine thread slept through the round. Wake it when it has
  // something to do: a stop or detach waiting for the round to end,
  // requests that came in meanwhile or are left to retry, or threads
  // blocked on handles (they count on it to run the next round). A
  // synchronous call that completed leaves none of these: no wake-up.
  if (stop_ || detach_requested_ || !incoming_.empty() || !taken_.empty() ||
      signals_->waiters > 0) {
    signals_->wake.SignalAll();
  }
}

bool Engine::WaitForWork() {
  while (true) {
    if (in_round_) {  // a waiter runs a round (Drive); it wakes us if needed
      signals_->wake.Wait(&mu());
      continue;
    }
    if (stop_) return false;
    if (detach_requested_) return true;
    const bool has_work = !incoming_.empty() || !taken_.empty();
    if (!attached_ || !refusal_.ok() || !has_work) {
      signals_->wake.Wait(&mu());
      continue;
    }
    // Someone waits, and there is news (new requests, or the last round
    // completed some, so peers may have moved on too): negotiate now.
    // Otherwise collect requests for a cycle, and never retry requests that
    // were not ready faster than that.
    const bool someone_waits = signals_->urgent || signals_->waiters > 0;
    if (someone_waits && (!incoming_.empty() || last_round_progressed_)) return true;
    absl::Time due = last_round_ + options_.cycle_time;
    if (!incoming_.empty()) due = std::max(due, first_incoming_ + options_.cycle_time);
    const absl::Time now = absl::Now();
    if (now >= due) return true;
    signals_->wake.WaitWithTimeout(&mu(), due - now);
  }
}

void Engine::Loop() {
  mu().Lock();
  while (WaitForWork()) {
    if (detach_requested_) {
      std::vector<Request> incoming = std::move(incoming_);
      incoming_.clear();
      attached_ = false;
      comm_ = nullptr;
      abort_ = nullptr;
      refusal_ = detach_reason_;
      const absl::Status reason = detach_reason_;
      mu().Unlock();
      for (Request& r : incoming) taken_.push_back(std::move(r));
      std::vector<Completion> done;
      FailEverything(reason, done);
      cache_.Clear();
      predictor_.Reset();
      joined_at_round_.clear();
      rounds_ = 0;
      Finish(done);
      mu().Lock();
      detach_requested_ = false;
      detached_.SignalAll();
      continue;
    }
    RunRoundLocked();
  }
  // Stopping: nothing may be left waiting.
  for (Request& r : incoming_) taken_.push_back(std::move(r));
  incoming_.clear();
  refusal_ = absl::AbortedError("the worker runtime is shutting down");
  mu().Unlock();
  std::vector<Completion> done;
  FailEverything(absl::AbortedError("the worker runtime is shutting down"), done);
  Finish(done);
}

void Engine::RunRound(CommunicatorRunner comm, int64_t fusion_threshold) {
  if (round_timeline_ != nullptr && round_timeline_->mark_cycles()) round_timeline_->CycleStart();
  std::vector<const Request*> pending;
  pending.reserve(taken_.size());
  for (const Request& r : taken_) pending.push_back(&r);
  absl::StatusOr<NegotiationResult> round;
  // Copied: Observe below may replace the prediction.
  const std::optional<PredictedAllreduce> predicted = predictor_.prediction();
  std::optional<size_t> confirmed;  // index in taken_ of the predicted request, completed
  bool confirmed_in_band = false;   // with no negotiation this round
  std::vector<std::string> pending_names;
  if (stall_.options().enabled) {
    for (const Request& r : taken_) pending_names.push_back(r.name);
  }
  absl::Status status = comm([&](Communicator& c) -> absl::Status {
    Negotiator* negotiator = c.negotiator();
    if (negotiator == nullptr) {
      return absl::InternalError("the engine's communicator has no negotiator");
    }
    if (stall_.options().enabled) stall_.RoundStarted(pending_names, c.rank(), c.size());
    const Speculation how = predicted ? ChooseSpeculation(c, *predicted) : Speculation::kNone;
    if (how == Speculation::kInBand) {
      HVDD_ASSIGN_OR_RETURN(const std::optional<size_t> in_band,
                            RunPredictedInBand(c, *predicted, taken_, fusion_));
      if (in_band.has_value()) {
        confirmed = in_band;
        confirmed_in_band = true;
        NegotiationResult in_band;
        in_band.ready = {predicted->name};
        in_band.fusion_threshold = fusion_threshold;
        round = std::move(in_band);
        return absl::OkStatus();
      }
    }
    if (how != Speculation::kOnCopy) {
      round = Negotiate(*negotiator, pending, fusion_threshold, cache_, &stall_);
      return round.status();
    }
    HVDD_ASSIGN_OR_RETURN(
        const std::unique_ptr<NegotiationInFlight> negotiation,
        NegotiationInFlight::Start(*negotiator, pending, fusion_threshold, cache_, &stall_));
    if (absl::Status started = StartPredictedOnCopy(c, *predicted, taken_, fusion_);
        !started.ok()) {
      return started;
    }
    round = negotiation->Finish(cache_);
    if (!round.ok()) return round.status();
    // With ranks joined the copy divided by every rank, not by those that
    // contributed: the request runs again the usual way (on every rank alike).
    if (round->joined.empty()) {
      confirmed = FinishPredictedOnCopy(*predicted, *round, taken_, fusion_);
    }
    return absl::OkStatus();
  });
  std::vector<Completion> done;
  last_round_progressed_ = status.ok() && (!round->ready.empty() || !round->conflicts.empty());
  if (status.ok() && round_timeline_ != nullptr) {
    for (const Request& r : taken_) {
      if (std::find(round->ready.begin(), round->ready.end(), r.name) != round->ready.end()) {
        round_timeline_->NegotiateEnd(r.name, TimelineOperationOf(r));
      }
    }
  }
  if (status.ok() && stall_.options().enabled) stall_.RoundDecided(round->waiting);
  if (status.ok()) {
    ++rounds_;
    for (int rank : round->joined) joined_at_round_.emplace(rank, rounds_);
    // Every rank confirmed in band, or none did: all skip or all observe.
    // No predictions while ranks have joined (a joined rank has no request).
    if (!round->joined.empty()) {
      predictor_.Reset();
    } else if (!confirmed_in_band) {
      predictor_.Observe(*round, taken_);
    }
    if (confirmed) {
      Request& r = taken_[*confirmed];
      done.push_back(Completion{r.handle, r.error_prefix, absl::OkStatus(), std::nullopt});
      auto in_ready = std::find(round->ready.begin(), round->ready.end(), r.name);
      // A confirmed prediction is one the round found ready on every rank.
      HVDD_CHECK(in_ready != round->ready.end())
          << "the confirmed prediction '" << r.name << "' is not in the round's ready list";
      round->ready.erase(in_ready);
      taken_.erase(taken_.begin() + static_cast<std::ptrdiff_t>(*confirmed));
      ++confirmed_predictions_;
    }
    std::unordered_map<std::string, absl::Status> conflicts;
    for (const Conflict& c : round->conflicts) {
      conflicts.emplace(c.name, absl::InvalidArgumentError(c.message));
    }
    if (!conflicts.empty()) {
      std::vector<Request> kept;
      for (Request& r : taken_) {
        auto it = conflicts.find(r.name);
        if (it == conflicts.end()) {
          kept.push_back(std::move(r));
        } else {
          done.push_back(Completion{r.handle, r.error_prefix, it->second, std::nullopt});
        }
      }
      taken_ = std::move(kept);
    }
    status = RunReady(*round, comm, done);
  }
  if (!status.ok()) FailEverything(RingFailure(status), done);
  Finish(done);
}

absl::Status Engine::RunReady(const NegotiationResult& round, const CommunicatorRunner& comm,
                              std::vector<Completion>& done) {
  const std::vector<std::string>& ready = round.ready;
  if (ready.empty()) return absl::OkStatus();
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < taken_.size(); ++i) index.emplace(taken_[i].name, i);
  std::vector<Request*> runnable;
  std::vector<bool> finished(taken_.size(), false);
  // The allreduces this rank takes part in on zeros, having joined; a deque
  // so that their addresses stay put.
  std::deque<StandIn> stand_ins;
  const bool with_joined = !round.joined.empty();
  for (size_t k = 0; k < ready.size(); ++k) {
    auto it = index.find(ready[k]);
    Request* request = nullptr;
    if (it != index.end()) {
      request = &taken_[it->second];
    } else if (with_joined) {
      absl::StatusOr<StandIn> stand_in = StandIn::Zeros(ready[k], round.ready_descriptors[k]);
      // Every rank decoded the same bytes when it decided the round.
      HVDD_CHECK(stand_in.ok()) << stand_in.status();
      stand_ins.push_back(*std::move(stand_in));
      request = &stand_ins.back().request;
    }
    if (request == nullptr) continue;
    if (request->kind == RequestKind::kJoin) {
      // Every rank has joined: the joins complete with the last to join.
      Tensor last(DType::kInt32, {});
      *last.data_as<int32_t>() = LastToJoin();
      joined_at_round_.clear();
      done.push_back(
          Completion{request->handle, request->error_prefix, absl::OkStatus(), std::move(last)});
      finished[request - taken_.data()] = true;
      continue;
    }
    runnable.push_back(request);
  }
  auto in_taken = [this](const Request* r) {
    return r >= taken_.data() && r < taken_.data() + taken_.size();
  };
  absl::Status failure;
  for (const Batch& batch : PlanBatches(runnable, round.fusion_threshold)) {
    ActivityObserver activity;
    if (round_timeline_ != nullptr) {
      activity = [this, &batch, &in_taken](const std::string& name) {
        const std::string batch_name = absl::StrCat(
            batch.requests.front()->name,
            batch.requests.size() > 1 ? absl::StrCat(" + ", batch.requests.size() - 1, " fused")
                                      : "");
        for (const Request* r : batch.requests) {
          if (!in_taken(r)) continue;
          round_timeline_->ActivityStart(r->name, name, batch_name,
                                         static_cast<int>(batch.requests.size()));
        }
      };
    }
    std::vector<std::optional<Tensor>> outputs;
    absl::Status status = RunBatch(batch, comm, fusion_, &outputs, activity);
    for (size_t i = 0; i < batch.requests.size(); ++i) {
      Request* r = batch.requests[i];
      if (!in_taken(r)) continue;  // a stand-in: nobody waits on it
      std::optional<Tensor> output;
      if (i < outputs.size()) output = std::move(outputs[i]);
      done.push_back(Completion{r->handle, r->error_prefix, status, std::move(output)});
      finished[r - taken_.data()] = true;
    }
    // Bad arguments leave the communicator usable; anything else ends it.
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
      failure = status;
      break;
    }
  }
  std::vector<Request> kept;
  for (size_t i = 0; i < taken_.size(); ++i) {
    if (!finished[i]) kept.push_back(std::move(taken_[i]));
  }
  taken_ = std::move(kept);
  return failure;
}

int Engine::LastToJoin() const {
  int last = -1;
  int64_t last_round = -1;
  // The latest round a join was first seen in; within it, the highest rank.
  for (const auto& [rank, round] : joined_at_round_) {
    if (round >= last_round) {
      last = rank;
      last_round = round;
    }
  }
  return last;
}

absl::StatusOr<Engine::StandIn> Engine::StandIn::Zeros(const std::string& name,
                                                       const std::string& descriptor) {
  HVDD_ASSIGN_OR_RETURN(const RequestDescriptor d, RequestDescriptor::Decode(descriptor));
  StandIn stand_in;
  Request& r = stand_in.request;
  r.name = name;
  r.kind = d.kind;
  r.descriptor = descriptor;
  r.options.op = d.op;
  r.options.prescale_factor = d.prescale_factor;
  r.options.postscale_factor = d.postscale_factor;
  r.root = d.root;
  stand_in.zeros.reserve(d.shapes.size());
  for (const std::vector<int64_t>& shape : d.shapes) {
    stand_in.zeros.emplace_back(d.dtype, shape);  // zero-filled
    r.tensors.push_back(stand_in.zeros.back().view());
  }
  return stand_in;
}

absl::Status Engine::RingFailure(const absl::Status& cause) const {
  absl::MutexLock lock(&mu());
  // Detach aborted the ring to wake us: its reason is the news, not the abort.
  if (detach_requested_) return detach_reason_;
  if (!stall_failure_.ok()) return stall_failure_;  // so did the stall check
  return absl::AbortedError(absl::StrCat("the ring of generation ", generation_,
                                         " failed, so the job must reset: ", cause.message()));
}

void Engine::FailEverything(const absl::Status& reason, std::vector<Completion>& done) {
  // Nothing of this ring waits any more: a worker on its way to the next
  // generation (or waiting for it to form) has nothing stalled to report.
  stall_.Reset();
  {
    absl::MutexLock lock(&mu());
    if (refusal_.ok()) refusal_ = reason;
    for (Request& r : incoming_) taken_.push_back(std::move(r));
    incoming_.clear();
  }
  for (Request& r : taken_)
    done.push_back(Completion{r.handle, r.error_prefix, reason, std::nullopt});
  taken_.clear();
}

void Engine::Finish(std::vector<Completion>& done) {
  if (done.empty()) return;
  std::shared_ptr<Timeline> timeline;
  {
    absl::MutexLock lock(&mu());
    for (const Completion& c : done) {
      pending_names_.erase(c.handle->name());
      if (activity_.tracker != nullptr) {
        activity_.tracker->Completed(activity_.process_set, c.handle->name(), c.status.ok(),
                                     absl::Now());
      }
    }
    timeline = timeline_;
  }
  if (timeline != nullptr) {
    for (const Completion& c : done) {
      timeline->End(c.handle->name(), std::string(c.status.message()));
    }
  }
  for (Completion& c : done) {
    absl::Status status = c.status;
    if (!status.ok() && !c.error_prefix.empty()) {
      status = absl::Status(status.code(), absl::StrCat(c.error_prefix, status.message()));
    }
    c.handle->Complete(std::move(status), std::move(c.output));
  }
  done.clear();
}

}  // namespace horovodd::internal
