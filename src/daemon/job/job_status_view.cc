#include "daemon/job/job_status_view.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace horovodd::daemon {
namespace {

double UnixSeconds(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::Time()) return 0;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace

JobStatusView::JobStatusView(const JobContext& context, const v1::JobSpec& spec, const Clock& clock,
                             const JobLifecycle& lifecycle, const WorkerTable& workers,
                             const GenerationPlanner& generations,
                             const discovery::HostManager& hosts, const ResetHistory& resets,
                             const GoodputLedger& goodput, const EventLog& events)
    : context_(context),
      spec_(spec),
      clock_(clock),
      lifecycle_(lifecycle),
      workers_(workers),
      generations_(generations),
      hosts_(hosts),
      resets_(resets),
      goodput_(goodput),
      events_(events) {}

v1::JobStatus JobStatusView::Now() const {
  v1::JobStatus s;
  s.set_job_id(context_.job_id);
  s.set_client_request_id(context_.client_request_id);
  *s.mutable_spec() = spec_;
  s.set_state(lifecycle_.state());
  s.set_reason(lifecycle_.reason());
  s.set_generation(generations_.ready_generation());
  s.set_size(static_cast<int>(generations_.ready_members().size()));
  const absl::Time now = clock_.Now();
  for (const auto& [id, w] : workers_) {
    auto* ws = s.add_workers();
    ws->set_worker_id(id);
    ws->set_rank(generations_.RankOf(id));
    ws->set_host(w.host);
    ws->set_pid(w.pid);
    ws->set_state(w.state);
    ws->set_exit_code(w.exit_code);
    ws->set_last_commit(w.last_commit);
    ws->set_resets(std::max(0, w.generations_joined - 1));
    if (w.activity.has_value()) {
      // Waits are measured on the worker's clock and placed on the daemon's:
      // a wait still going on has grown since the report by the report's age.
      v1::WorkerActivity* activity = ws->mutable_activity();
      *activity = *w.activity;
      ws->set_activity_unix(UnixSeconds(w.activity_at));
      if (activity->has_waiting()) {
        v1::CollectiveWait* wait = activity->mutable_waiting();
        const absl::Duration waited = absl::Seconds(wait->waited_seconds());
        wait->set_since_unix(UnixSeconds(w.activity_at - waited));
        wait->set_waited_seconds(absl::ToDoubleSeconds(now - w.activity_at + waited));
      }
    }
    if (stall_ != nullptr && ws->rank() >= 0) {
      auto it = stall_->straggling().find(id);
      if (it != stall_->straggling().end()) {
        ws->set_lost_seconds_per_step(it->second.lost_seconds_per_step);
        ws->set_straggler(it->second.straggler);
      }
    }
  }
  if (stall_ != nullptr && stall_->current().has_value()) *s.mutable_stall() = *stall_->current();
  for (const auto& h : hosts_.Hosts(now)) {
    auto* hs = s.add_hosts();
    hs->set_host(h.host);
    hs->set_slots(h.slots);
    hs->set_state(discovery::HostStateName(h.state));
    // -1: blacklisted for the rest of the job (no --blacklist-cooldown-range).
    hs->set_cooldown_seconds_left(
        h.cooldown_left == absl::InfiniteDuration() ? -1 : absl::ToDoubleSeconds(h.cooldown_left));
  }
  s.set_resets(resets_.resets());
  s.set_last_commit(resets_.last_commit());
  s.set_created_unix(UnixSeconds(lifecycle_.created()));
  s.set_started_unix(UnixSeconds(lifecycle_.started()));
  s.set_ended_unix(UnixSeconds(lifecycle_.ended_at()));
  s.set_min_np(spec_.min_np());
  s.set_max_np(spec_.max_np());
  for (const auto& record : resets_.records()) *s.add_reset_history() = record;
  *s.mutable_goodput() = goodput_.Report(now);
  for (auto& event : events_.RecentNonOutput(20)) *s.add_recent_events() = std::move(event);
  return s;
}

}  // namespace horovodd::daemon
