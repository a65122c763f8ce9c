// One thread that runs posted closures in order, now or at a deadline. Each
// job driver owns one: every field of the driver is touched only on its loop
// thread, so the driver needs no locks and gRPC / launcher / discovery threads
// talk to it only by posting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

class EventLoop {
 public:
  using TimerId = uint64_t;

  EventLoop();
  // Runs nothing more: pending closures are dropped, the thread is joined.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // False (fn dropped) once the loop is stopping.
  bool Post(std::function<void()> fn);
  // Runs fn at (or soon after) `when` unless cancelled first.
  TimerId PostAt(absl::Time when, std::function<void()> fn);
  TimerId PostAfter(absl::Duration delay, std::function<void()> fn) {
    return PostAt(absl::Now() + delay, std::move(fn));
  }
  void Cancel(TimerId id);

  // Stops the thread after the closure running now; later posts are dropped.
  void Stop();
  bool InLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                      // guarded by mu_
  std::vector<std::function<void()>> queue_;   // guarded by mu_
  // (deadline, id) -> closure; guarded by mu_.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_;
  std::map<TimerId, absl::Time> timer_deadlines_;  // guarded by mu_
  TimerId next_timer_id_ = 1;                      // guarded by mu_
  std::thread thread_;
};

}  // namespace horovodd::daemon
