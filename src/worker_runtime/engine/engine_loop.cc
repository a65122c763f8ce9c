#include "worker_runtime/engine/engine_loop.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
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

Engine::Engine(EngineOptions options) : options_(std::move(options)), refusal_(NotAMember()) {
  {
    absl::MutexLock lock(&mu());
    signals_->engine = this;
  }
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mu());
    stop_ = true;
    signals_->engine = nullptr;  // no waiter starts a round from now on
  }
  signals_->wake.SignalAll();
  thread_.join();
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

void Engine::Attach(int64_t generation, RingRunner ring) {
  {
    absl::MutexLock lock(&mu());
    attached_ = true;
    generation_ = generation;
    ring_ = std::move(ring);
    refusal_ = absl::OkStatus();
  }
  signals_->wake.SignalAll();
}

void Engine::Detach(const absl::Status& reason, const std::function<void()>& abort_ring) {
  mu().Lock();
  detach_requested_ = true;
  detach_reason_ = reason;
  signals_->wake.SignalAll();
  // The engine thread starts no round once detach_requested_ is set, so
  // only a round already running needs waking.
  if (in_round_ && abort_ring) {
    mu().Unlock();
    abort_ring();
    mu().Lock();
  }
  while (detach_requested_) detached_.Wait(&mu());
  mu().Unlock();
}

absl::StatusOr<Handle> Engine::Enqueue(Request request, bool urgent) {
  absl::ReleasableMutexLock lock(&mu());
  if (!refusal_.ok()) return ForRequest(request, refusal_);
  if (!pending_names_.insert(request.name).second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a collective named '", request.name,
        "' is already pending on this rank: synchronize it before reusing the name"));
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
  RingRunner ring = ring_;
  const int64_t threshold = options_.fusion_threshold_bytes;
  last_round_ = absl::Now();
  mu().Unlock();
  RunRound(std::move(ring), threshold);
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
      ring_ = nullptr;
      refusal_ = detach_reason_;
      const absl::Status reason = detach_reason_;
      mu().Unlock();
      for (Request& r : incoming) taken_.push_back(std::move(r));
      std::vector<Completion> done;
      FailEverything(reason, done);
      cache_.Clear();
      predictor_.Reset();
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

void Engine::RunRound(RingRunner ring, int64_t fusion_threshold) {
  std::vector<const Request*> pending;
  pending.reserve(taken_.size());
  for (const Request& r : taken_) pending.push_back(&r);
  absl::StatusOr<NegotiationResult> round;
  // Copied: Observe below may replace the prediction.
  const std::optional<PredictedAllreduce> predicted = predictor_.prediction();
  std::optional<size_t> confirmed;  // index in taken_ of the predicted request, completed
  bool confirmed_in_band = false;   // with no negotiation this round
  absl::Status status = ring([&](GlooContext& context) -> absl::Status {
    const Speculation how =
        predicted ? ChooseSpeculation(context, *predicted) : Speculation::kNone;
    if (how == Speculation::kInBand) {
      HVDD_ASSIGN_OR_RETURN(const std::optional<size_t> in_band,
                            RunPredictedInBand(context, *predicted, taken_, fusion_));
      if (in_band.has_value()) {
        confirmed = in_band;
        confirmed_in_band = true;
        round = NegotiationResult{{predicted->name}, {}, fusion_threshold};
        return absl::OkStatus();
      }
    }
    if (how != Speculation::kOnCopy) {
      round = Negotiate(context, pending, fusion_threshold, cache_);
      return round.status();
    }
    HVDD_ASSIGN_OR_RETURN(
        const std::unique_ptr<NegotiationInFlight> negotiation,
        NegotiationInFlight::Start(context, pending, fusion_threshold, cache_));
    if (absl::Status started = StartPredictedOnCopy(context, *predicted, taken_, fusion_);
        !started.ok()) {
      return started;
    }
    round = negotiation->Finish(cache_);
    if (!round.ok()) return round.status();
    confirmed = FinishPredictedOnCopy(*predicted, *round, taken_, fusion_);
    return absl::OkStatus();
  });
  std::vector<Completion> done;
  last_round_progressed_ = status.ok() && (!round->ready.empty() || !round->conflicts.empty());
  if (status.ok()) {
    // Every rank confirmed in band, or none did: all skip or all observe.
    if (!confirmed_in_band) predictor_.Observe(*round, taken_);
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
    status = RunReady(round->ready, ring, round->fusion_threshold, done);
  }
  if (!status.ok()) FailEverything(RingFailure(status), done);
  Finish(done);
}

absl::Status Engine::RunReady(const std::vector<std::string>& ready, const RingRunner& ring,
                              int64_t fusion_threshold, std::vector<Completion>& done) {
  if (ready.empty()) return absl::OkStatus();
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < taken_.size(); ++i) index.emplace(taken_[i].name, i);
  std::vector<Request*> runnable;
  std::vector<bool> finished(taken_.size(), false);
  for (const std::string& name : ready) {
    auto it = index.find(name);
    if (it != index.end()) runnable.push_back(&taken_[it->second]);
  }
  absl::Status ring_failure;
  for (const Batch& batch : PlanBatches(runnable, fusion_threshold)) {
    std::vector<std::optional<Tensor>> outputs;
    absl::Status status = RunBatch(batch, ring, fusion_, &outputs);
    for (size_t i = 0; i < batch.requests.size(); ++i) {
      Request* r = batch.requests[i];
      std::optional<Tensor> output;
      if (i < outputs.size()) output = std::move(outputs[i]);
      done.push_back(Completion{r->handle, r->error_prefix, status, std::move(output)});
      finished[r - taken_.data()] = true;
    }
    // Bad arguments leave the ring usable; anything else ends it.
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
      ring_failure = status;
      break;
    }
  }
  std::vector<Request> kept;
  for (size_t i = 0; i < taken_.size(); ++i) {
    if (!finished[i]) kept.push_back(std::move(taken_[i]));
  }
  taken_ = std::move(kept);
  return ring_failure;
}

absl::Status Engine::RingFailure(const absl::Status& cause) const {
  absl::MutexLock lock(&mu());
  // Detach aborted the ring to wake us: its reason is the news, not the abort.
  if (detach_requested_) return detach_reason_;
  return absl::AbortedError(absl::StrCat("the ring of generation ", generation_,
                                         " failed, so the job must reset: ", cause.message()));
}

void Engine::FailEverything(const absl::Status& reason, std::vector<Completion>& done) {
  {
    absl::MutexLock lock(&mu());
    if (refusal_.ok()) refusal_ = reason;
    for (Request& r : incoming_) taken_.push_back(std::move(r));
    incoming_.clear();
  }
  for (Request& r : taken_) done.push_back(Completion{r.handle, r.error_prefix, reason, std::nullopt});
  taken_.clear();
}

void Engine::Finish(std::vector<Completion>& done) {
  if (done.empty()) return;
  {
    absl::MutexLock lock(&mu());
    for (const Completion& c : done) pending_names_.erase(c.handle->name());
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
