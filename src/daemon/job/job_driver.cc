// JobDriver: construction (the parts, and who calls back whom) and the entry
// points (operator and worker RPCs, status). Membership changes (planning,
// exits, losses) are in job_membership.cc.
#include "daemon/job/job_driver.h"

#include <algorithm>
#include <cstdlib>
#include <future>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/validation/request_validation.h"

namespace horovodd::daemon {

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  // The checks live with those of every other request (request_validation.h).
  return ValidateJobSpecFields(spec);
}

JobDriver::JobDriver(JobContext context, v1::JobSpec spec)
    : context_(std::move(context)),
      spec_(std::move(spec)),
      clock_(*context_.clock),
      events_(
          20000,
          [observer = context_.observer, id = context_.job_id](const v1::JobEvent& e) {
            if (observer != nullptr) observer->OnJobEvent(id, e);
          },
          &clock_),
      lifecycle_(events_, clock_, [this] { checkpointer_.Changed(); }),
      // A fixed-size job is -np workers, whatever its hosts offer.
      generations_(spec_.elastic() ? spec_.max_np() : spec_.num_proc(),
                   spec_.elastic() ? spec_.hot_spares() : 0, spec_.num_proc()),
      recorder_(
          events_, [this] { return generations_.generation(); },
          [this] { checkpointer_.Changed(); }),
      liveness_(spec_),
      hosts_(
          spec_, loop_, lifecycle_, recorder_,
          [this](const std::string& cause, bool detected) {
            if (detected) resets_.Detected(clock_.Now());
            Replan(cause, ReplanTrigger::kMembershipChange);
          },
          [this](const std::string& why) {
            if (!HoldFailure(why)) end_.Finish(v1::FAILED, why);
          }),
      kv_(context_.kv_limits, loop_),
      status_(context_, spec_, clock_, lifecycle_, workers_, generations_, hosts_.manager(),
              resets_, goodput_, events_),
      checkpointer_(context_, loop_, lifecycle_, generations_, hosts_.manager(),
                    [this] { return status_.Now(); }),
      end_(
          context_, loop_, lifecycle_, workers_, generations_, recorder_,
          [this] {
            hosts_.StopTimers();
            liveness_.Stop();
            if (stall_timer_ != 0) loop_.Cancel(stall_timer_);
            stall_timer_ = 0;
            kv_.AdvanceTo(std::numeric_limits<int64_t>::max());
            goodput_.End(lifecycle_.ended_at());
          },
          [this] { return status_.Now(); }),
      starter_(
          context_, spec_, loop_, events_, generations_.bind_addresses(),
          [this](int64_t id, const ExitInfo& exit, absl::Time exited_at) {
            OnWorkerExit(id, exit, exited_at);
          },
          [this](int64_t id, const absl::StatusOr<LaunchedProcess>& launched) {
            launches_.Launched(id, launched);
          }),
      launches_(context_, lifecycle_, workers_, generations_, liveness_, hosts_, recorder_,
                starter_, end_,
                [this] {
                  NotifyOnceJoinersWait();
                  TryCompleteRendezvous();
                }),
      stall_(StallSettings::ForJob(spec_, [](const char* name) { return std::getenv(name); }),
             spec_.elastic()),
      loop_(&clock_) {
  status_.ShowStalls(&stall_);
  if (context_.gate != nullptr) {
    gate_watch_ = context_.gate->Watch([this] { loop_.Post([this] { GateChanged(); }); });
    if (!context_.gate->open()) loop_.Post([this] { GateChanged(); });
  }
}

JobDriver::~JobDriver() {
  if (context_.gate != nullptr) context_.gate->Unwatch(gate_watch_);
  hosts_.StopDiscovery();
  loop_.Stop();
  starter_.Shutdown();  // a launch finishing now finds the loop stopped
}

void JobDriver::Start() {
  loop_.Post([this] {
    lifecycle_.MarkStarted();
    goodput_.Start(lifecycle_.started());
    recorder_.Record(
        v1::JobEvent::INFO,
        absl::StrCat("job ", context_.job_id, " submitted: ", absl::StrJoin(spec_.argv(), " "),
                     " (np ", spec_.num_proc(), ", min ", spec_.min_np(), ", max ",
                     spec_.max_np() > 0 ? std::to_string(spec_.max_np()) : "unlimited",
                     spec_.elastic() ? ", elastic)" : ", fixed size)"));
    // Until enough hosts show up the job is below min np.
    hosts_.ArmBelowMinTimer(0, spec_.num_proc());
    hosts_.StartDiscovery();  // a listed host set plans at once
    if (lifecycle_.Terminal()) return;
    WatchLiveness();
    WatchStalls();
  });
}

void JobDriver::WatchLiveness() {
  liveness_.Watch(
      loop_, workers_,
      [this](const LivenessMonitor::Lost& lost) {
        OnWorkerLost(lost.worker_id, lost.reason, lost.last_seen);
      },
      [this](absl::Duration stalled) {
        recorder_.Record(
            v1::JobEvent::WARNING,
            absl::StrCat("horovodd did not run for ", absl::ToInt64Milliseconds(stalled),
                         " ms (the daemon or its machine was stalled): that time is "
                         "not counted as its workers' silence"));
      });
}

void JobDriver::Cancel(const std::string& reason) {
  loop_.Post([this, reason] { end_.Finish(v1::CANCELLED, reason); });
}

void JobDriver::SetDrained(const std::string& host, bool drained) {
  loop_.Post([this, host, drained] { hosts_.SetDrained(host, drained); });
}

void JobDriver::Rendezvous(const v1::RendezvousRequest& request, RendezvousReply reply) {
  loop_.Post([this, request, reply = std::move(reply)]() mutable {
    Worker* w = workers_.Find(request.who().worker_id());
    if (w == nullptr) {
      reply(absl::NotFoundError(absl::StrCat("worker ", request.who().worker_id(),
                                             " is not part of job ", context_.job_id)));
      return;
    }
    if (lifecycle_.Terminal()) {
      reply(absl::AbortedError(absl::StrCat("job ended: ", lifecycle_.reason())));
      return;
    }
    liveness_.Seen(w->id, clock_.Now());
    liveness_.AskedRendezvous(w->id);
    w->Refuse(absl::AbortedError("superseded by a newer rendezvous call"));
    w->waiting = true;
    w->after_generation = request.after_generation();
    w->reply = std::move(reply);
    // Held (leaving a blacklisted host): its answer waits for the plan to form.
    if (generations_.Holds(w->id)) return;
    // A spare waits here until a generation needs it (Replan promotes it).
    if (IsSpare(*w)) {
      if (w->state == v1::WORKER_SPARE_STARTING) {
        w->state = v1::WORKER_SPARE_READY;
        recorder_.Record(v1::JobEvent::INFO,
                         absl::StrCat("spare ", w->id, " on ", w->host, " is ready"));
      }
      return;
    }
    if (w->state == v1::WORKER_REMOVED || !generations_.IsMember(w->id)) {
      w->state = v1::WORKER_REMOVED;
      w->Answer(generations_.RemovedAnswer());
      return;
    }
    const bool settled = !generations_.rendezvous_open();
    if (settled && w->after_generation < generations_.ready_generation()) {
      w->Answer(generations_.ReadyAnswer(*w, generations_.RankOf(w->id)));
      return;
    }
    if (settled && w->after_generation >= generations_.generation()) {
      // Its ring broke in a generation we still think is fine: the daemon has
      // not seen the cause (yet), so start a new generation now rather than
      // leave the worker waiting.
      resets_.Detected(clock_.Now());
      goodput_.FailureNoticed(clock_.Now(), clock_.Now());
      Replan(absl::StrCat(generations_.Describe(*w), " lost its ring in generation ",
                          generations_.generation()),
             ReplanTrigger::kBrokenRing);
    }
    NotifyOnceJoinersWait();
    TryCompleteRendezvous();
  });
}

void JobDriver::KvSet(const v1::KvSetRequest& request, std::function<void(absl::Status)> reply) {
  loop_.Post([this, request, reply = std::move(reply)] {
    if (workers_.Find(request.who().worker_id()) == nullptr) {
      reply(absl::NotFoundError("unknown worker"));
      return;
    }
    reply(kv_.Set(request));
  });
}

void JobDriver::KvGet(const v1::KvGetRequest& request, KvGetReply reply) {
  loop_.Post([this, request, reply = std::move(reply)]() mutable {
    if (workers_.Find(request.who().worker_id()) == nullptr) {
      reply(absl::NotFoundError("unknown worker"));
      return;
    }
    kv_.Get(request, std::move(reply));
  });
}

void JobDriver::Attach(int64_t worker_id, std::shared_ptr<WorkerChannel> channel) {
  loop_.Post([this, worker_id, channel = std::move(channel)] {
    Worker* w = workers_.Find(worker_id);
    if (w == nullptr) return;
    w->attached = true;
    w->channel = channel;
    liveness_.Seen(worker_id, clock_.Now());
    v1::DaemonMessage hello;
    hello.set_generation(generations_.generation());
    channel->Send(hello);
  });
}

void JobDriver::Heartbeat(int64_t worker_id, std::optional<v1::WorkerActivity> activity) {
  loop_.Post([this, worker_id, activity = std::move(activity)]() mutable {
    HeardHeartbeat(worker_id, std::move(activity), clock_.Now());
  });
}

void JobDriver::Heartbeats(std::vector<WorkerHeartbeat> heartbeats) {
  loop_.Post([this, heartbeats = std::move(heartbeats)]() mutable {
    const absl::Time now = clock_.Now();
    for (WorkerHeartbeat& h : heartbeats) HeardHeartbeat(h.worker_id, std::move(h.activity), now);
  });
}

void JobDriver::HeardHeartbeat(int64_t worker_id, std::optional<v1::WorkerActivity> activity,
                               absl::Time now) {
  Worker* w = workers_.Find(worker_id);
  if (w == nullptr) return;
  liveness_.Seen(worker_id, now);
  if (!activity.has_value() || w->gone()) return;
  goodput_.Activity(w->joined_generation, *activity, now);
  WorkerTable::Reported(*w, *std::move(activity), now);
}

void JobDriver::Detach(int64_t worker_id, const WorkerChannel* channel) {
  loop_.Post([this, worker_id, channel] {
    Worker* w = workers_.Find(worker_id);
    if (w == nullptr || w->channel.get() != channel) return;
    w->attached = false;
    w->channel.reset();
  });
}

void JobDriver::ReportCommit(const v1::CommitReport& report) {
  loop_.Post([this, report] {
    if (Worker* w = workers_.Find(report.who().worker_id())) {
      w->last_commit = std::max(w->last_commit, report.commit());
      resets_.Committed(report.generation(), report.commit(), clock_.Now());
      goodput_.Committed(report.generation(), clock_.Now());
      checkpointer_.Committed();
    }
  });
}

void JobDriver::ReportFailure(const v1::FailureReport& report) {
  loop_.Post([this, report] {
    Worker* w = workers_.Find(report.who().worker_id());
    // Reports about a generation already replaced say nothing new.
    if (w == nullptr || report.generation() < generations_.ready_generation() ||
        w->reported_failure_generation >= report.generation()) {
      return;
    }
    w->reported_failure_generation = report.generation();
    goodput_.FailureSeen(clock_.Now());
    recorder_.Record(
        v1::JobEvent::WARNING,
        absl::StrCat(generations_.Describe(*w), " reported a failed collective in generation ",
                     report.generation(), ": ", report.message()));
  });
}

v1::JobStatus JobDriver::Status() {
  auto promise = std::make_shared<std::promise<v1::JobStatus>>();
  auto future = promise->get_future();
  loop_.Post([this, promise] { promise->set_value(status_.Now()); });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    v1::JobStatus s;
    s.set_job_id(context_.job_id);
    s.set_reason("status unavailable: the job's driver is busy");
    return s;
  }
  return future.get();
}

}  // namespace horovodd::daemon
