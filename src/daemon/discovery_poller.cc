#include "daemon/discovery_poller.h"

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
    lock.unlock();
    on_result_(source_->Discover());
    lock.lock();
    cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_), [this] { return stop_; });
  }
}

}  // namespace horovodd::daemon
