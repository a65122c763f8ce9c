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
};

// absl::Now(), and absl::CondVar's own deadline. Process-wide, never destroyed.
const Clock& RealClock();

// Time that moves only when Advance() is called. Every thread blocked in
// WaitUntil() is woken by Advance(), so an EventLoop on this clock runs the
// timers whose deadlines Advance() passed. A loop waiting on it must not be
// destroyed during an Advance() call (tests advance and destroy from one
// thread).
class SimulatedClock final : public Clock {
 public:
  // Starts at an arbitrary but fixed point well after the Unix epoch.
  explicit SimulatedClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000));

  absl::Time Now() const override;
  void WaitUntil(absl::Time deadline, absl::Mutex* mu, absl::CondVar* cv) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Moves time forward (never back: a negative `by` is an invariant
  // violation) and wakes every waiter.
  void Advance(absl::Duration by);

 private:
  struct Waiter {
    absl::Mutex* mu;
    absl::CondVar* cv;
  };

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
