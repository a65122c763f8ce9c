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
    absl::MutexLock lock(&mu_);
    stop_ = true;  // wakes Run's Await as the lock is released
  }
  thread_.join();
}

void DiscoveryPoller::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    // Runs start `interval` apart, not `interval` after the previous run
    // ended: a new slot is seen at most one interval after it appears, however
    // long the script takes (a script slower than the interval runs back to
    // back).
    const auto next = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(interval_);
    on_result_(source_->Discover());
    absl::MutexLock lock(&mu_);
    const auto left = next - std::chrono::steady_clock::now();
    if (left > left.zero()) mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(left));
  }
}

}  // namespace horovodd::daemon
