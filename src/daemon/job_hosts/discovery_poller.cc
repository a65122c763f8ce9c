#include "daemon/job_hosts/discovery_poller.h"

#include <algorithm>
#include <chrono>

#include "discovery/slurm_host_source.h"

namespace horovodd::daemon {
namespace {

// --host-discovery slurm: the allocation horovodrun found, polled with the script's timeout.
discovery::SlurmHostSourceOptions SlurmHostSourceOptionsOf(const v1::JobSpec& spec) {
  discovery::SlurmHostSourceOptions options;
  options.job_id = spec.slurm().job_id();
  options.node_list = spec.slurm().node_list();
  options.tasks_per_node = spec.slurm().tasks_per_node();
  options.slots_per_host = spec.discovery().default_slots();
  if (spec.discovery().script_timeout_seconds() > 0) {
    options.timeout = absl::Seconds(spec.discovery().script_timeout_seconds());
  }
  return options;
}

}  // namespace

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

std::unique_ptr<DiscoveryPoller> DiscoveryPoller::ForJob(const v1::JobSpec& spec,
                                                         Callback on_result) {
  const auto& d = spec.discovery();
  std::unique_ptr<discovery::HostSource> source;
  if (d.slurm()) {
    source = discovery::MakeSlurmHostSource(SlurmHostSourceOptionsOf(spec));
  } else if (!d.script().empty()) {
    source = discovery::MakeScriptHostSource(d.script(), std::max(1, d.default_slots()),
                                             absl::Seconds(d.script_timeout_seconds()));
  }
  if (source == nullptr) return nullptr;
  return std::make_unique<DiscoveryPoller>(std::move(source), absl::Seconds(d.interval_seconds()),
                                           std::move(on_result));
}

discovery::HostSet ListedHosts(const v1::JobSpec& spec) {
  discovery::HostSet hosts;
  for (const auto& h : spec.discovery().hosts()) hosts.push_back({h.host(), h.slots()});
  return hosts;
}

}  // namespace horovodd::daemon
