#include "daemon/job/discovery_poller.h"

#include <chrono>

namespace horovodd::daemon {

DiscoveryPoller::DiscoveryPoller(std::unique_ptr<discovery::HostSource> source,
                                 absl::Duration interval, Callback on_result)
    : source_(std::move(source)),
      interval_(interval),
      on_result_(std::move(on_result)),
      thread_([this] { Run(); }) {}

DiscoveryPoller::~DiscoveryPoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DiscoveryPoller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Runs start `interval` apart, not `interval` after the previous run
    // ended: a new slot is seen at most one interval after it appears, however
    // long the script takes (a script slower than the interval runs back to
    // back).
    const auto next = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(interval_);
    lock.unlock();
    on_result_(source_->Discover());
    lock.lock();
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

}  // namespace horovodd::daemon
