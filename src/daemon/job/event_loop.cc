#include "daemon/job/event_loop.h"

#include <chrono>

namespace horovodd::daemon {

EventLoop::EventLoop() : thread_([this] { Loop(); }) {}

EventLoop::~EventLoop() {
  Stop();
  if (thread_.joinable()) {
    if (InLoopThread()) {
      thread_.detach();  // destroyed from its own closure: nothing left to run
    } else {
      thread_.join();
    }
  }
}

bool EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return true;
}

EventLoop::TimerId EventLoop::PostAt(absl::Time when, std::function<void()> fn) {
  TimerId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return 0;
    id = next_timer_id_++;
    timers_.emplace(std::make_pair(when, id), std::move(fn));
    timer_deadlines_[id] = when;
  }
  cv_.notify_one();
  return id;
}

void EventLoop::Cancel(TimerId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadlines_.erase(it);
}

void EventLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    timers_.clear();
    timer_deadlines_.clear();
  }
  cv_.notify_all();
}

void EventLoop::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (!queue_.empty()) {
      std::vector<std::function<void()>> batch;
      batch.swap(queue_);
      lock.unlock();
      for (auto& fn : batch) fn();
      lock.lock();
      continue;
    }
    if (!timers_.empty()) {
      auto first = timers_.begin();
      absl::Time deadline = first->first.first;
      if (deadline <= absl::Now()) {
        auto fn = std::move(first->second);
        timer_deadlines_.erase(first->first.second);
        timers_.erase(first);
        lock.unlock();
        fn();
        lock.lock();
        continue;
      }
      cv_.wait_until(lock, absl::ToChronoTime(deadline));
    } else {
      cv_.wait(lock);
    }
  }
}

}  // namespace horovodd::daemon
