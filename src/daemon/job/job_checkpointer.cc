#include "daemon/job/job_checkpointer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace horovodd::daemon {

JobCheckpointer::JobCheckpointer(const JobContext& context, EventLoop& loop,
                                 const JobLifecycle& lifecycle,
                                 const GenerationPlanner& generations,
                                 const discovery::HostManager& hosts,
                                 std::function<v1::JobStatus()> status)
    : context_(context),
      loop_(loop),
      lifecycle_(lifecycle),
      generations_(generations),
      hosts_(hosts),
      status_(std::move(status)) {}

bool JobCheckpointer::Off() const {
  return !context_.checkpoints || context_.observer == nullptr || lifecycle_.Ended();
}

void JobCheckpointer::Changed() {
  if (Off() || write_posted_) return;
  write_posted_ = loop_.Post([this] {
    write_posted_ = false;
    Write();
  });
}

void JobCheckpointer::Committed() {
  if (Off() || commit_timer_ != 0 || write_posted_) return;
  const absl::Time due = last_write_ + kCommitInterval;
  if (loop_.clock().Now() >= due) {
    Changed();
    return;
  }
  commit_timer_ = loop_.PostAt(due, [this] {
    commit_timer_ = 0;
    Write();
  });
}

void JobCheckpointer::Write() {
  if (Off()) return;
  const absl::Time now = loop_.clock().Now();
  last_write_ = now;
  JobCheckpoint checkpoint;
  checkpoint.status = status_();
  checkpoint.status.clear_recent_events();  // the journal has them
  checkpoint.status.clear_spec();           // and this
  checkpoint.planned_generation = generations_.generation();
  checkpoint.planned_members = generations_.members();
  for (const discovery::HostInfo& h : hosts_.Hosts(now)) {
    if (h.failures == 0 && h.cooldowns == 0) continue;
    HostCooldown& c = checkpoint.host_cooldowns.emplace_back();
    c.host = h.host;
    c.failures = h.failures;
    c.cooldowns = h.cooldowns;
    c.last_failure = h.last_failure;
    c.until =
        h.cooldown_left == absl::ZeroDuration() ? absl::InfinitePast() : now + h.cooldown_left;
  }
  context_.observer->OnJobCheckpoint(context_.job_id, checkpoint);
}

bool JobCheckpointer::RestoreHosts(const JobCheckpoint& checkpoint, discovery::HostManager& hosts) {
  // Until discovery says otherwise: its first answer then changes nothing
  // unless the hosts did.
  discovery::HostSet known;
  std::vector<std::string> drained;
  for (const v1::HostStatus& h : checkpoint.status.hosts()) {
    if (h.state() == "lost") continue;
    known.push_back({h.host(), h.slots()});
    if (h.state() == "drained") drained.push_back(h.host());
  }
  if (!known.empty()) {
    std::sort(known.begin(), known.end(),
              [](const auto& a, const auto& b) { return a.host < b.host; });
    hosts.UpdateDiscovered(known);
    for (const std::string& host : drained) hosts.Drain(host);
  }
  for (const HostCooldown& c : checkpoint.host_cooldowns) {
    hosts.RestoreFailures(c.host, c.failures, c.cooldowns, c.last_failure, c.until);
  }
  return !known.empty();
}

}  // namespace horovodd::daemon
