#include "daemon/workers/liveness_monitor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "daemon/workers/heartbeat_interval.h"

namespace horovodd::daemon {
namespace {

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

LivenessMonitor::LivenessMonitor(const v1::JobSpec& spec)
    : start_timeout_s_(spec.start_timeout_seconds()),
      liveness_timeout_s_(spec.liveness_timeout_seconds()),
      heartbeat_interval_(HeartbeatIntervalOf(spec)) {}

void LivenessMonitor::Launched(int64_t id, absl::Time now) {
  Heard heard;
  heard.launched_at = heard.last_seen = now;
  heard.deaf_at_launch = heard.deaf_at_seen = deaf_;
  heard_[id] = heard;
}

void LivenessMonitor::Reattached(int64_t id, absl::Time now) {
  Launched(id, now);
  heard_[id].reattached = true;
}

void LivenessMonitor::Seen(int64_t id, absl::Time now) {
  auto it = heard_.find(id);
  if (it == heard_.end()) return;
  it->second.last_seen = now;
  it->second.deaf_at_seen = deaf_;
  it->second.heard_from = true;
}

void LivenessMonitor::AskedRendezvous(int64_t id) {
  auto it = heard_.find(id);
  if (it != heard_.end()) it->second.asked_rendezvous = true;
}

void LivenessMonitor::Forget(int64_t id) { heard_.erase(id); }

void LivenessMonitor::Deaf(absl::Duration stalled) { deaf_ += stalled; }

std::vector<LivenessMonitor::Lost> LivenessMonitor::Check(absl::Time now,
                                                          const WorkerTable& workers) const {
  const absl::Duration silent_limit = absl::Seconds(liveness_timeout_s_);
  const absl::Duration start_limit = absl::Seconds(start_timeout_s_);
  std::vector<Lost> lost;
  for (const auto& [id, w] : workers) {
    if (w.handle == 0 || w.state == v1::WORKER_REMOVED) continue;
    auto it = heard_.find(id);
    if (it == heard_.end()) continue;
    const Heard& heard = it->second;
    // Time the daemon was not listening is no one's silence.
    const absl::Duration since_launch = now - heard.launched_at - (deaf_ - heard.deaf_at_launch);
    const absl::Duration silence = now - heard.last_seen - (deaf_ - heard.deaf_at_seen);
    if (heard.reattached && !heard.heard_from) {
      // Taken back by a restarted daemon: its Attach stream is back within
      // about a second (DaemonClient waits for the channel), so it has the
      // liveness timeout to reconnect, as any attached worker has to speak.
      if (since_launch > silent_limit) {
        lost.push_back({id,
                        absl::StrCat("did not reconnect within --liveness-timeout ",
                                     liveness_timeout_s_, "s after horovodd restarted"),
                        heard.last_seen});
      }
      continue;
    }
    const bool started = heard.asked_rendezvous || w.joined_generation != 0;
    if (!started && since_launch > start_limit) {
      // Attached or not: a worker that never asked for a generation is still
      // starting, however alive it sounds.
      lost.push_back(
          {id,
           absl::StrCat(heard.heard_from ? "did not ask for a rendezvous" : "did not connect",
                        " within --start-timeout ", start_timeout_s_, "s"),
           heard.last_seen});
      continue;
    }
    if (!heard.heard_from) continue;  // not connected yet: only its start is bounded
    // A worker that closed its Attach stream is ending (its runtime shut
    // down; the interpreter may take seconds to exit on a loaded machine) or
    // reconnecting: its exit or its new stream is awaited up to the grace
    // after which a worker cut off from its daemon ends itself.
    const absl::Duration limit = w.attached ? silent_limit : std::max(silent_limit, kDetachedGrace);
    if (silence > limit) {
      lost.push_back({id,
                      absl::StrCat("silent for ", Millis(now - heard.last_seen),
                                   w.attached ? "" : " after closing its stream",
                                   " (--liveness-timeout ", liveness_timeout_s_, "s)"),
                      heard.last_seen});
    }
  }
  return lost;
}

void LivenessMonitor::Watch(EventLoop& loop, const WorkerTable& workers, LostHandler on_lost,
                            StalledHandler on_stalled) {
  HVDD_CHECK(loop_ == nullptr && timer_ == 0) << "liveness already watched";
  loop_ = &loop;
  workers_ = &workers;
  on_lost_ = std::move(on_lost);
  on_stalled_ = std::move(on_stalled);
  last_check_ = absl::InfinitePast();
  CheckNow();
}

void LivenessMonitor::Stop() {
  if (timer_ != 0) loop_->Cancel(timer_);
  timer_ = 0;
  loop_ = nullptr;
}

void LivenessMonitor::CheckNow() {
  timer_ = 0;
  const absl::Time now = loop_->clock().Now();
  // Due one period after the last check. Later than a heartbeat interval past
  // that, the daemon itself did not run (a stopped process, a stalled machine):
  // the heartbeats sent meanwhile wait unread in its sockets, and judging by
  // them now would kill every live worker at once.
  const bool first = last_check_ == absl::InfinitePast();
  const absl::Duration stalled = now - last_check_;
  last_check_ = now;
  if (!first && stalled > period() + heartbeat_interval_) {
    Deaf(stalled - period());
    on_stalled_(stalled);
  }
  for (const Lost& lost : Check(now, *workers_)) on_lost_(lost);
  if (loop_ == nullptr) return;  // stopped by a handler
  timer_ = loop_->PostAfter(period(), [this] { CheckNow(); });
}

absl::Duration LivenessMonitor::period() const {
  // Finer than the heartbeat interval (timeout/4), so a silence is found at
  // most an eighth of the timeout late.
  return std::clamp(absl::Seconds(liveness_timeout_s_) / 8, absl::Milliseconds(50),
                    absl::Seconds(1));
}

}  // namespace horovodd::daemon
