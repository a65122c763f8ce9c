#include "daemon/loop/clock.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "common/check.h"

namespace horovodd::daemon {
namespace {

class WallClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void WaitUntil(absl::Time deadline, absl::Mutex* mu, absl::CondVar* cv) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv->WaitWithDeadline(mu, deadline);
  }
};

}  // namespace

const Clock& RealClock() {
  static const WallClock* const clock = new WallClock();
  return *clock;
}

SimulatedClock::SimulatedClock(absl::Time start) : now_(start) {}

absl::Time SimulatedClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void SimulatedClock::WaitUntil(absl::Time deadline, absl::Mutex* mu, absl::CondVar* cv) const {
  // Lock order: the waiter's mu, then mu_. MoveTo() never holds mu_ while it
  // takes a waiter's mu, and it takes that mu before signalling, so a waiter
  // that registered here cannot miss the signal: it holds its mu until Wait()
  // releases it.
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return;
    Forget(cv);
    waiters_.push_back({mu, cv, deadline});
    waiting_changed_.SignalAll();
  }
  cv->Wait(mu);
  absl::MutexLock lock(&mu_);
  Forget(cv);
}

void SimulatedClock::Enroll(absl::CondVar* /*cv*/) const {
  absl::MutexLock lock(&mu_);
  ++sleepers_;
}

void SimulatedClock::Withdraw(absl::CondVar* cv) const {
  absl::MutexLock lock(&mu_);
  HVDD_CHECK(sleepers_ > 0) << "a sleeper withdrew that never enrolled";
  --sleepers_;
  Forget(cv);
  waiting_changed_.SignalAll();
}

void SimulatedClock::Woken(absl::CondVar* cv) const {
  absl::MutexLock lock(&mu_);
  Forget(cv);
}

void SimulatedClock::Forget(absl::CondVar* cv) const {
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                [cv](const Waiter& w) { return w.cv == cv; }),
                 waiters_.end());
}

bool SimulatedClock::CaughtUp() const {
  int waiting = 0;
  for (const Waiter& w : waiters_) {
    if (w.deadline <= now_) return false;  // signalled, not yet awake
    ++waiting;
  }
  return waiting >= sleepers_;
}

void SimulatedClock::AwaitCaughtUp() {
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  while (!CaughtUp()) {
    HVDD_CHECK(absl::Now() < give_up)
        << "SimulatedClock: a sleeper did not come back to wait within a minute (a closure "
           "blocked on the thread that moves the clock?)";
    waiting_changed_.WaitWithDeadline(&mu_, give_up);
  }
}

void SimulatedClock::MoveTo(absl::Time to) {
  now_ = to;
  std::vector<Waiter> due;
  for (const Waiter& w : waiters_) {
    if (w.deadline <= now_) due.push_back(w);
  }
  mu_.Unlock();  // lock order: a waiter's mu before mu_
  for (const Waiter& w : due) {
    absl::MutexLock lock(w.mu);
    w.cv->SignalAll();
  }
  mu_.Lock();
}

void SimulatedClock::Advance(absl::Duration by) {
  HVDD_CHECK(by >= absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  const absl::Time target = now_ + by;
  while (true) {
    AwaitCaughtUp();
    absl::Time next = target;
    for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
    MoveTo(next);
    if (next == target) break;
  }
  AwaitCaughtUp();
}

void SimulatedClock::Jump(absl::Duration by) {
  HVDD_CHECK(by >= absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  AwaitCaughtUp();
  MoveTo(now_ + by);
  AwaitCaughtUp();
}

}  // namespace horovodd::daemon
