// Runs a job's host source on its own thread, every `interval` (start to
// start), and hands each result to `on_result`. The discovery script
// therefore never runs on the job's loop or under any lock, and a slow script
// stalls only its own job.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "discovery/host_source.h"

namespace horovodd::daemon {

class DiscoveryPoller {
 public:
  using Callback = std::function<void(absl::StatusOr<discovery::HostSet>)>;

  DiscoveryPoller(std::unique_ptr<discovery::HostSource> source, absl::Duration interval,
                  Callback on_result);
  ~DiscoveryPoller();  // stops and joins (waits for a running script to end)

 private:
  void Run();

  std::unique_ptr<discovery::HostSource> source_;
  const absl::Duration interval_;
  Callback on_result_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace horovodd::daemon
