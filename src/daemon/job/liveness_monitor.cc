#include "daemon/job/liveness_monitor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

std::string Millis(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d), " ms");
}

}  // namespace

LivenessMonitor::LivenessMonitor(const v1::JobSpec& spec)
    : start_timeout_s_(spec.start_timeout_seconds()),
      liveness_timeout_s_(spec.liveness_timeout_seconds()),
      elastic_timeout_s_(spec.elastic_timeout_seconds()) {}

void LivenessMonitor::Launched(int64_t id, absl::Time now) { heard_[id] = Heard{now, now}; }

void LivenessMonitor::Reattached(int64_t id, absl::Time now) {
  Heard heard{now, now};
  heard.reattached = true;
  heard_[id] = heard;
}

void LivenessMonitor::Seen(int64_t id, absl::Time now) {
  auto it = heard_.find(id);
  if (it == heard_.end()) return;
  it->second.last_seen = now;
  it->second.heard_from = true;
}

void LivenessMonitor::Forget(int64_t id) { heard_.erase(id); }

std::vector<LivenessMonitor::Lost> LivenessMonitor::Check(
    absl::Time now, const WorkerTable& workers, const GenerationPlanner& generations) const {
  const absl::Duration silent_limit = absl::Seconds(liveness_timeout_s_);
  const absl::Duration start_limit = absl::Seconds(start_timeout_s_);
  const absl::Duration join_limit = absl::Seconds(elastic_timeout_s_);
  std::vector<Lost> lost;
  for (const auto& [id, w] : workers) {
    if (w.handle == 0 || w.state == v1::WORKER_REMOVED) continue;
    auto it = heard_.find(id);
    if (it == heard_.end()) continue;
    const Heard& heard = it->second;
    if (!heard.heard_from && ((!w.attached && w.joined_generation == 0) || heard.reattached)) {
      if (now - heard.launched_at > start_limit) {
        lost.push_back({id, absl::StrCat("did not connect within --start-timeout ",
                                         start_timeout_s_, "s")});
      }
      continue;
    }
    if (now - heard.last_seen > silent_limit) {
      lost.push_back({id, absl::StrCat("silent for ", Millis(now - heard.last_seen),
                                       " (--liveness-timeout ", liveness_timeout_s_, "s)")});
    } else if (generations.rendezvous_open() && !w.waiting &&
               now - generations.planned_at() > join_limit && generations.IsMember(id) &&
               generations.Told(id)) {  // last: O(members) per worker
      lost.push_back({id, absl::StrCat("did not join generation ", generations.generation(),
                                       " within --elastic-timeout ", elastic_timeout_s_,
                                       "s")});
    }
  }
  return lost;
}

absl::Duration LivenessMonitor::period() const {
  return std::clamp(absl::Seconds(liveness_timeout_s_) / 4, absl::Milliseconds(50),
                    absl::Seconds(1));
}

}  // namespace horovodd::daemon
