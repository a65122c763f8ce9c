// Where the news that this daemon no longer leads goes: the election's thread
// and the journal's fenced writes both report it here, possibly before the
// daemon that must step down exists (the election is won, and its lease kept
// alive, while the daemon still starts). The daemon connects itself once.
//
// Threading: any thread; the connected callback runs once, on the reporting
// thread (or on Connect's, when the loss came first), without the lock.
#pragma once

#include <functional>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {

class LeadershipLoss {
 public:
  void Report() ABSL_LOCKS_EXCLUDED(mu_) {
    std::function<void()> to;
    {
      absl::MutexLock lock(&mu_);
      if (lost_) return;
      lost_ = true;
      to = to_;
    }
    if (to) to();
  }

  void Connect(std::function<void()> to) ABSL_LOCKS_EXCLUDED(mu_) {
    bool lost = false;
    {
      absl::MutexLock lock(&mu_);
      to_ = to;
      lost = lost_;
    }
    if (lost && to) to();
  }

  bool lost() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return lost_;
  }

 private:
  mutable absl::Mutex mu_;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> to_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
