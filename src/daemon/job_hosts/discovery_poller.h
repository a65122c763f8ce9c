// Runs a job's host source on its own thread, every `interval` (start to
// start), and hands each result to `on_result`. The discovery script
// therefore never runs on the job's loop or under any lock, and a slow script
// stalls only its own job.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "discovery/host_source.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class DiscoveryPoller {
 public:
  using Callback = std::function<void(absl::StatusOr<discovery::HostSet>)>;

  DiscoveryPoller(std::unique_ptr<discovery::HostSource> source, absl::Duration interval,
                  Callback on_result);
  // The poller of `spec`'s discovery script or Slurm allocation (every
  // --discovery interval); nullptr for a job that lists its hosts instead
  // (ListedHosts).
  static std::unique_ptr<DiscoveryPoller> ForJob(const v1::JobSpec& spec, Callback on_result);
  ~DiscoveryPoller()
      ABSL_LOCKS_EXCLUDED(mu_);  // stops and joins (waits for a running script to end)

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<discovery::HostSource> source_;
  const absl::Duration interval_;
  Callback on_result_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // awaited between runs
  std::thread thread_;
};

// The hosts `spec` lists (-H, --hostfile), in the order given: the order
// ranks are assigned in.
discovery::HostSet ListedHosts(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
