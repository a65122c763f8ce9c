// Where the job code reads time and how its event loop waits for a deadline.
// The daemon runs on RealClock(); tests hand a SimulatedClock to an EventLoop
// and a JobDriver and move time by hand, so a 60 s elastic timeout takes no
// 60 s of real time.
#pragma once

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // Blocks on `cv` until this clock reads `deadline` or later, or until `cv`
  // is signalled (spurious returns allowed: callers recheck). `mu` is held on
  // entry and on return, and released while waiting, as absl::CondVar does.
  virtual void WaitUntil(absl::Time deadline, absl::Mutex* mu, absl::CondVar* cv) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // For a clock that moves only when told (SimulatedClock), which sleepers it
  // must let catch up before it moves on: a sleeper is a thread that waits on
  // `cv` (under its own mutex) in WaitUntil, enrolled from before its first
  // wait until after its last. Woken(cv) says its owner signalled it (new
  // work): it is not waiting any more, whatever deadline it waited for. The
  // real clock needs none of this.
  virtual void Enroll(absl::CondVar* /*cv*/) const {}
  virtual void Withdraw(absl::CondVar* /*cv*/) const {}
  virtual void Woken(absl::CondVar* /*cv*/) const {}
};

// absl::Now(), and absl::CondVar's own deadline. Process-wide, never destroyed.
const Clock& RealClock();

// Time that moves only when Advance() or Jump() is called. Advance() moves it
// as real time would: it stops at each enrolled sleeper's deadline on the way,
// and goes on only once every sleeper has run what was due and waits again,
// so a loop's timers run each at its own deadline and in order. Jump() moves
// it at once, as when the whole process was stopped: every timer due runs
// late. Both return once every sleeper waits again. A sleeper that does not
// come back to wait within a minute of real time (a closure blocked on the
// thread that moves the clock) is an invariant violation, not a hang.
class SimulatedClock final : public Clock {
 public:
  // Starts at an arbitrary but fixed point well after the Unix epoch.
  explicit SimulatedClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000));

  absl::Time Now() const override;
  void WaitUntil(absl::Time deadline, absl::Mutex* mu, absl::CondVar* cv) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Enroll(absl::CondVar* cv) const override;
  void Withdraw(absl::CondVar* cv) const override;
  void Woken(absl::CondVar* cv) const override;

  // Moves time forward by `by` (never back: a negative `by` is an invariant
  // violation), through every deadline on the way.
  void Advance(absl::Duration by);
  // Moves time forward by `by` in one step.
  void Jump(absl::Duration by);

 private:
  struct Waiter {
    absl::Mutex* mu;
    absl::CondVar* cv;
    absl::Time deadline;
  };

  // Sets the time to `to` and wakes the waiters whose deadline it reached.
  void MoveTo(absl::Time to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Until every enrolled sleeper waits for a deadline after now.
  void AwaitCaughtUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CaughtUp() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(absl::CondVar* cv) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  mutable absl::CondVar waiting_changed_;  // a sleeper began or stopped waiting
};

}  // namespace horovodd::daemon
