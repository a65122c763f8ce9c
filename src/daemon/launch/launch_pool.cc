#include "daemon/launch/launch_pool.h"

#include <system_error>
#include <utility>

namespace horovodd::daemon {

LaunchPool::~LaunchPool() { Shutdown(); }

void LaunchPool::Shutdown() {
  std::list<Runner> runners;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    runners.swap(runners_);
  }
  for (Runner& r : runners) r.thread.join();
}

void LaunchPool::Submit(std::function<void()> task) {
  std::list<Runner> finished;
  bool inline_run = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (auto it = runners_.begin(); it != runners_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), runners_, it);
      it = next;
    }
    queue_.push_back(std::move(task));
    // A free runner takes it (it waits on WorkOrStopping).
    if (queue_.size() > idle_ && runners_.size() < max_threads_) {
      runners_.emplace_back();
      Runner* runner = &runners_.back();
      try {
        // Takes mu_ first thing: waits until this Submit is done with it.
        runner->thread = std::thread([this, runner] { Drain(runner); });
      } catch (const std::system_error&) {
        runners_.pop_back();
        if (runners_.empty()) {  // nobody would ever run it
          task = std::move(queue_.back());
          queue_.pop_back();
          inline_run = true;
        }
      }
    }
  }
  for (Runner& r : finished) r.thread.join();  // they have returned or are about to
  if (inline_run) task();
}

void LaunchPool::Drain(Runner* self) {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      ++idle_;
      mu_.AwaitWithTimeout(absl::Condition(this, &LaunchPool::WorkOrStopping), kLinger);
      --idle_;
      if (queue_.empty()) break;  // stopping, or nothing came
      continue;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    task();
    mu_.Lock();
  }
  self->done = true;
}

}  // namespace horovodd::daemon
