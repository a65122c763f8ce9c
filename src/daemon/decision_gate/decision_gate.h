// Whether this daemon's job drivers may decide now: plan a generation,
// launch, kill or evict a worker, end a job on a worker's exit or loss.
// The leadership side owns it and moves it (LeaderElection: held once the
// leader has gone a lease TTL without renewing, open again when a renewal
// succeeds, closed when etcd says the lease is gone); the drivers ask it
// before acting and hold what they would have done until it reopens. A
// daemon without an election has no gate: its drivers always decide.
//
// Threading: any thread. Watchers are called on the thread that moves the
// gate, under the gate's lock: they must only post (e.g. to a job's loop),
// never call back into the gate. Unwatch returns once no call to that
// watcher is running.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {

class DecisionGate {
 public:
  enum class State {
    kOpen,    // decide as usual
    kHeld,    // hold decisions: they may be taken once the gate reopens
    kClosed,  // no longer leading: never decide again (the daemon steps down)
  };

  State state() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return state_;
  }
  bool open() const { return state() == State::kOpen; }
  // Why decisions are held (set by Hold), for the jobs' events.
  std::string why_held() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return why_held_;
  }

  // Decisions wait from now, `why` says why. No effect once closed.
  void Hold(std::string why) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kOpen) return;
    state_ = State::kHeld;
    why_held_ = std::move(why);
    NotifyLocked();
  }
  // Decisions go on. No effect once closed.
  void Open() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kHeld) return;
    state_ = State::kOpen;
    NotifyLocked();
  }
  // For good.
  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    NotifyLocked();
  }

  // `changed` is called at each move of the gate (see Threading); returns
  // the id to Unwatch it with.
  int64_t Watch(std::function<void()> changed) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    watchers_[next_id_] = std::move(changed);
    return next_id_++;
  }
  void Unwatch(int64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    watchers_.erase(id);
  }

 private:
  void NotifyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& [id, changed] : watchers_) changed();
  }

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kOpen;
  std::string why_held_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::function<void()>> watchers_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace horovodd::daemon
