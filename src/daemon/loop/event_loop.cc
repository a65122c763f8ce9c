#include "daemon/loop/event_loop.h"

namespace horovodd::daemon {

EventLoop::EventLoop(const Clock* clock) : clock_(clock) {
  clock_->Enroll(&cv_);  // withdrawn by the thread as it ends
  thread_ = std::thread([this] { Loop(); });
}

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
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  cv_.Signal();
  clock_->Woken(&cv_);
  return true;
}

EventLoop::TimerId EventLoop::PostAt(absl::Time when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return 0;
  const TimerId id = next_timer_id_++;
  timers_.emplace(std::make_pair(when, id), std::move(fn));
  timer_deadlines_[id] = when;
  cv_.Signal();
  clock_->Woken(&cv_);
  return id;
}

void EventLoop::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadlines_.erase(it);
}

void EventLoop::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  queue_.clear();
  timers_.clear();
  timer_deadlines_.clear();
  cv_.SignalAll();
  clock_->Woken(&cv_);
}

void EventLoop::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (!queue_.empty()) {
      std::vector<std::function<void()>> batch;
      batch.swap(queue_);
      mu_.Unlock();
      for (auto& fn : batch) fn();
      mu_.Lock();
      continue;
    }
    if (timers_.empty()) {
      clock_->WaitUntil(absl::InfiniteFuture(), &mu_, &cv_);
      continue;
    }
    auto first = timers_.begin();
    const absl::Time deadline = first->first.first;
    if (deadline > clock_->Now()) {
      clock_->WaitUntil(deadline, &mu_, &cv_);
      continue;
    }
    auto fn = std::move(first->second);
    timer_deadlines_.erase(first->first.second);
    timers_.erase(first);
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
  clock_->Withdraw(&cv_);
}

}  // namespace horovodd::daemon
