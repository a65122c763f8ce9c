// One thread that runs posted closures in order, now or at a deadline. Each
// job driver owns one: every field of the driver is touched only on its loop
// thread, so the driver needs no locks and gRPC / launcher / discovery threads
// talk to it only by posting. Deadlines are read on the loop's Clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/loop/clock.h"

namespace horovodd::daemon {

class EventLoop {
 public:
  using TimerId = uint64_t;

  // `clock` outlives the loop.
  explicit EventLoop(const Clock* clock = &RealClock());
  // Runs nothing more: pending closures are dropped, the thread is joined.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // False (fn dropped) once the loop is stopping.
  bool Post(std::function<void()> fn);
  // Runs fn once the clock reads `when` (or soon after) unless cancelled first.
  TimerId PostAt(absl::Time when, std::function<void()> fn);
  TimerId PostAfter(absl::Duration delay, std::function<void()> fn) {
    return PostAt(clock_->Now() + delay, std::move(fn));
  }
  void Cancel(TimerId id);

  // Stops the thread after the closure running now; later posts are dropped.
  void Stop();
  bool InLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  const Clock& clock() const { return *clock_; }

 private:
  void Loop();

  const Clock* const clock_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  // (deadline, id) -> closure.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  std::map<TimerId, absl::Time> timer_deadlines_ ABSL_GUARDED_BY(mu_);
  TimerId next_timer_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread thread_;  // started by the constructor once the fields above exist
};

}  // namespace horovodd::daemon
