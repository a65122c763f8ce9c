// Runs a job's remote launches off its loop thread. Starting a worker over
// SSH blocks for a connect, a key exchange, a login and the remote start:
// a few hundred milliseconds on a good day, tens of seconds for a host that
// does not answer. On the job's loop that would hold up every rendezvous
// answer, key-value read and status query of the job meanwhile, and start
// the workers of several hosts one after another.
//
// Up to max_threads launches run at once; threads are started when work
// arrives and no thread is free, and end once the queue has been empty for
// kLinger, so an idle job holds none, and a job launching thousands of
// workers, one after another from its loop, does not start a thread for
// each.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

class LaunchPool {
 public:
  // How long a thread with nothing to do waits for more before it ends.
  static constexpr absl::Duration kLinger = absl::Seconds(1);

  explicit LaunchPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  // Shutdown().
  ~LaunchPool();
  LaunchPool(const LaunchPool&) = delete;
  LaunchPool& operator=(const LaunchPool&) = delete;

  // Runs `task` on a pool thread, or on the calling thread when no thread
  // can be started and none is running. Dropped once the pool is going.
  void Submit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the tasks running; queued ones and later ones never run.
  // Idempotent; Submit may race with it.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Runner {
    std::thread thread;
    bool done = false;  // guarded by the pool's mu_; the thread is about to return
  };
  void Drain(Runner* self) ABSL_LOCKS_EXCLUDED(mu_);
  bool WorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  }

  const size_t max_threads_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::list<Runner> runners_ ABSL_GUARDED_BY(mu_);  // joined once done
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;            // runners waiting for work
};

}  // namespace horovodd::daemon
