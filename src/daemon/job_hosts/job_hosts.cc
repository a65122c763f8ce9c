#include "daemon/job_hosts/job_hosts.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "daemon/job_hosts/discovery_poller.h"

namespace horovodd::daemon {

discovery::CooldownPolicy CooldownPolicyOf(const v1::JobSpec& spec) {
  // No range (0 0): Horovod's default, a failing host is blacklisted for the
  // rest of the job.
  if (spec.blacklist_cooldown_max_seconds() <= 0) {
    return {absl::InfiniteDuration(), absl::InfiniteDuration()};
  }
  return {absl::Seconds(spec.blacklist_cooldown_min_seconds()),
          absl::Seconds(spec.blacklist_cooldown_max_seconds())};
}

JobHosts::JobHosts(const v1::JobSpec& spec, EventLoop& loop, JobLifecycle& lifecycle,
                   EventRecorder& recorder, ChangedHandler on_changed, TimedOutHandler on_timed_out)
    : spec_(spec),
      loop_(loop),
      lifecycle_(lifecycle),
      recorder_(recorder),
      on_changed_(std::move(on_changed)),
      on_timed_out_(std::move(on_timed_out)),
      manager_(CooldownPolicyOf(spec)) {}

JobHosts::~JobHosts() = default;

void JobHosts::StartDiscovery() {
  HVDD_CHECK(poller_ == nullptr) << "discovery started twice";
  poller_ = DiscoveryPoller::ForJob(spec_, [this](absl::StatusOr<discovery::HostSet> hosts) {
    loop_.Post([this, hosts = std::move(hosts)] { OnHosts(hosts); });
  });
  if (poller_ == nullptr) OnHosts(ListedHosts(spec_));
}

void JobHosts::StopDiscovery() { poller_.reset(); }

void JobHosts::OnHosts(absl::StatusOr<discovery::HostSet> hosts) {
  if (lifecycle_.Terminal()) return;
  if (!hosts.ok()) {
    std::string message(hosts.status().message());
    if (message != last_discovery_error_) {
      recorder_.Record(
          v1::JobEvent::WARNING,
          absl::StrCat("host discovery failed, keeping the last good hosts: ", message),
          "discovery_failed");
      last_discovery_error_ = message;
    }
    return;
  }
  if (!last_discovery_error_.empty()) {
    recorder_.Record(v1::JobEvent::INFO, "host discovery works again");
    last_discovery_error_.clear();
  }
  discovery::HostDiff diff = manager_.UpdateDiscovered(*hosts);
  const bool first = lifecycle_.HostsFound();
  if (!first && diff.empty()) {
    // Every discovery run may grow the job to the usable slots (a launch that
    // failed, say); a plan that changes nothing does nothing.
    on_changed_("discovery", /*detected=*/false);
    return;
  }
  std::vector<std::string> parts;
  for (const auto& h : *hosts) parts.push_back(absl::StrCat(h.host, ":", h.slots));
  std::string summary =
      absl::StrCat("hosts ", parts.empty() ? "(none)" : absl::StrJoin(parts, ","));
  recorder_.Record(v1::JobEvent::INFO, first ? absl::StrCat("discovered ", summary)
                                             : absl::StrCat("hosts changed, now ", summary));
  on_changed_(first ? "job start" : "hosts changed", /*detected=*/!first);
}

void JobHosts::SetDrained(const std::string& host, bool drained) {
  if (lifecycle_.Terminal()) return;
  if (drained) {
    manager_.Drain(host);
    recorder_.Record(v1::JobEvent::INFO, absl::StrCat("host ", host, " drained by the operator"));
    on_changed_(absl::StrCat("host ", host, " drained"), /*detected=*/true);
  } else {
    manager_.Undrain(host);
    recorder_.Record(v1::JobEvent::INFO, absl::StrCat("host ", host, " undrained by the operator"));
    on_changed_(absl::StrCat("host ", host, " undrained"), /*detected=*/false);
  }
}

std::string JobHosts::Blacklist(const std::string& host, const std::string& why, absl::Time now) {
  const absl::Duration cooldown = manager_.ReportFailure(host, why, now);
  ScheduleCooldownWakeup();
  if (cooldown == absl::InfiniteDuration()) {
    return absl::StrCat("host ", host, " is blacklisted for the rest of the job");
  }
  int times = 0;
  for (const auto& h : manager_.Hosts(now)) {
    if (h.host == host) times = h.cooldowns;
  }
  return absl::StrCat("host ", host, " is blacklisted for ", absl::ToInt64Milliseconds(cooldown),
                      " ms (cooldown ", times, ")");
}

void JobHosts::LaunchFailed(const std::string& host, const absl::Status& status) {
  // The host is the problem (unreachable, refused): it sits out a cooldown
  // and the job goes on with the others.
  const std::string why(status.message());
  manager_.ReportFailure(host, why, loop_.clock().Now());
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat("cannot start a worker on ", host, ": ", why, "; host in cooldown"),
                   "launch_failed");
  ScheduleCooldownWakeup();
  loop_.Post([this] { on_changed_("a worker could not be started", /*detected=*/false); });
}

void JobHosts::ScheduleCooldownWakeup() {
  if (cooldown_timer_ != 0) loop_.Cancel(cooldown_timer_);
  cooldown_timer_ = 0;
  absl::Time next = manager_.NextCooldownEnd(loop_.clock().Now());
  if (next == absl::InfiniteFuture()) return;
  cooldown_timer_ = loop_.PostAt(next + absl::Milliseconds(1), [this] {
    cooldown_timer_ = 0;
    on_changed_("a host's cooldown ended", /*detected=*/false);
    ScheduleCooldownWakeup();
  });
}

void JobHosts::ArmBelowMinTimer(int available, int needed) {
  if (below_min_timer_ != 0) return;
  const char* flag = needed == spec_.min_np() ? "--min-np" : "-np";
  // Before the first hosts nothing was planned: nothing to warn about.
  if (lifecycle_.MayPlan()) {
    recorder_.Record(v1::JobEvent::WARNING,
                     absl::StrCat("only ", available, " worker(s) possible, below ", flag, " ",
                                  needed, "; waiting up to --elastic-timeout ",
                                  spec_.elastic_timeout_seconds(), "s for more slots"));
  }
  below_min_timer_ =
      loop_.PostAfter(absl::Seconds(spec_.elastic_timeout_seconds()), [this, flag, needed] {
        below_min_timer_ = 0;
        int usable = discovery::TotalSlots(manager_.UsableHosts(loop_.clock().Now()));
        std::string why =
            absl::StrCat("could not reach ", flag, " ", needed, " within --elastic-timeout ",
                         spec_.elastic_timeout_seconds(), "s (", usable, " usable slot(s)");
        if (!last_discovery_error_.empty()) {
          absl::StrAppend(&why, "; discovery: ", last_discovery_error_);
        }
        on_timed_out_(why + ")");
      });
}

void JobHosts::CancelBelowMinTimer() {
  if (below_min_timer_ != 0) loop_.Cancel(below_min_timer_);
  below_min_timer_ = 0;
}

void JobHosts::StopTimers() {
  CancelBelowMinTimer();
  if (cooldown_timer_ != 0) loop_.Cancel(cooldown_timer_);
  cooldown_timer_ = 0;
}

}  // namespace horovodd::daemon
