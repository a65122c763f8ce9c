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
  // Lock order: the waiter's mu, then mu_. Advance() never holds mu_ while it
  // takes a waiter's mu, and it takes that mu before signalling, so a waiter
  // that registered here cannot miss the signal: it holds its mu until Wait()
  // releases it.
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return;
    waiters_.push_back({mu, cv});
  }
  cv->Wait(mu);
  absl::MutexLock lock(&mu_);
  auto it =
      std::find_if(waiters_.begin(), waiters_.end(), [cv](const Waiter& w) { return w.cv == cv; });
  if (it != waiters_.end()) waiters_.erase(it);
}

void SimulatedClock::Advance(absl::Duration by) {
  HVDD_CHECK(by >= absl::ZeroDuration());
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    now_ += by;
    waiters = waiters_;
  }
  for (const Waiter& w : waiters) {
    absl::MutexLock lock(w.mu);
    w.cv->SignalAll();
  }
}

}  // namespace horovodd::daemon
