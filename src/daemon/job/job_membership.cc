// JobDriver: membership. Planning generations, worker exits, liveness,
// rendezvous completion (launching workers: job_launch.cc). Runs on the
// job's loop thread.
#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

std::string Millis(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d), " ms");
}

}  // namespace

void JobDriver::OnHosts(absl::StatusOr<discovery::HostSet> hosts) {
  if (Terminal()) return;
  if (!hosts.ok()) {
    std::string message(hosts.status().message());
    if (message != last_discovery_error_) {
      Event(v1::JobEvent::WARNING,
            absl::StrCat("host discovery failed, keeping the last good hosts: ", message),
            "discovery_failed");
      last_discovery_error_ = message;
    }
    return;
  }
  if (!last_discovery_error_.empty()) {
    Event(v1::JobEvent::INFO, "host discovery works again");
    last_discovery_error_.clear();
  }
  discovery::HostDiff diff = hosts_.UpdateDiscovered(*hosts);
  const bool first = !hosts_known_;
  hosts_known_ = true;
  if (!first && diff.empty()) return;
  std::vector<std::string> parts;
  for (const auto& h : *hosts) parts.push_back(absl::StrCat(h.host, ":", h.slots));
  std::string summary = absl::StrCat("hosts ", parts.empty() ? "(none)" : absl::StrJoin(parts, ","));
  Event(v1::JobEvent::INFO, first ? absl::StrCat("discovered ", summary)
                                  : absl::StrCat("hosts changed, now ", summary));
  if (!first && reset_detected_ == absl::InfinitePast()) reset_detected_ = absl::Now();
  Replan(first ? "job start" : "hosts changed", /*failure=*/false);
}

int JobDriver::MaxSize() const { return spec_.max_np() > 0 ? spec_.max_np() : 0; }

void JobDriver::Replan(const std::string& cause, bool failure, bool force) {
  if (Terminal() || finishing_ || !hosts_known_) return;
  const absl::Time now = absl::Now();
  PlanInput input;
  for (int64_t id : members_) {
    const Worker& w = workers_.at(id);
    input.current.push_back({id, w.host});
    if (w.state == v1::WORKER_FAILED || w.gone()) input.lost.insert(id);
  }
  for (const auto& h : hosts_.Hosts(now)) {
    // Drained hosts keep no workers; hosts in cooldown keep the ones they have.
    if (h.state == discovery::HostState::kUsable || h.state == discovery::HostState::kCooldown) {
      input.discovered[h.host] = h.slots;
    }
  }
  for (const auto& h : hosts_.UsableHosts(now)) input.usable[h.host] = h.slots;
  input.max_size = generation_ == 0
                       ? std::min(spec_.num_proc(), MaxSize() > 0 ? MaxSize() : spec_.num_proc())
                       : MaxSize();
  Plan plan = PlanGeneration(input);
  if (plan.size() < spec_.min_np()) {
    // Also when nothing changed: a job whose hosts all refuse workers must
    // still end at --elastic-timeout.
    ArmBelowMinTimer(plan.size());
    return;
  }
  if (!force && plan.unchanged(members_.size())) return;
  if (below_min_timer_ != 0) {
    loop_.Cancel(below_min_timer_);
    below_min_timer_ = 0;
  }
  if (generation_ > 0) {
    if (spec_.reset_limit() > 0 && resets_ >= spec_.reset_limit()) {
      Finish(v1::FAILED, absl::StrCat("reset limit ", spec_.reset_limit(),
                                      " reached (--reset-limit); last cause: ", cause));
      return;
    }
    ++resets_;
    SetState(v1::RESETTING);
    v1::ResetRecord record;
    record.set_generation(generation_ + 1);
    record.set_cause(cause);
    record.set_detected_unix(UnixSeconds(reset_detected_ == absl::InfinitePast() ? now
                                                                                 : reset_detected_));
    reset_history_.push_back(std::move(record));
    if (reset_history_.size() > 100) reset_history_.erase(reset_history_.begin());
  }
  ++generation_;
  planned_at_ = now;
  for (int64_t id : plan.removed) {
    Worker& w = workers_.at(id);
    Event(v1::JobEvent::INFO, absl::StrCat(Describe(w), " leaves: its slot is gone"));
    w.state = v1::WORKER_REMOVED;
    if (w.waiting) AnswerRemoved(w);
  }
  members_.clear();
  rendezvous_scan_ = 0;
  for (const auto& m : plan.survivors) members_.push_back(m.worker_id);
  Event(v1::JobEvent::INFO,
        absl::StrCat("generation ", generation_, " planned: size ", plan.size(), " (",
                     plan.survivors.size(), " kept, ", plan.new_hosts.size(), " new, ",
                     plan.removed.size(), " leaving); cause: ", cause));
  kv_.AdvanceTo(generation_);
  // Growing a running job: its members train on while the new workers start
  // (a process, maybe an interpreter importing a framework: seconds), and
  // hear of the new generation once every new member waits for it.
  const bool grow_only = ready_generation_ > 0 && !failure && plan.removed.empty() &&
                         !plan.new_hosts.empty();
  if (!grow_only) {
    joiners_pending_ = false;
    joiners_.clear();
    NotifyWorkers(failure);
  }
  const size_t first_new = members_.size();
  for (const auto& host : plan.new_hosts) {
    LaunchWorker(host, static_cast<int>(members_.size()));
    if (Terminal()) return;
  }
  if (grow_only) {
    joiners_.insert(joiners_.end(), members_.begin() + static_cast<std::ptrdiff_t>(first_new),
                    members_.end());
    joiners_pending_ = true;
    NotifyOnceJoinersWait();  // at once when none could be started
  }
  TryCompleteRendezvous();
}

bool JobDriver::Told(int64_t id) const {
  return !joiners_pending_ || std::find(joiners_.begin(), joiners_.end(), id) != joiners_.end();
}

void JobDriver::NotifyOnceJoinersWait() {
  if (!joiners_pending_ || Terminal()) return;
  for (int64_t id : joiners_) {
    const Worker* w = FindWorker(id);
    // One that left the plan (its launch failed) is not waited for.
    if (w == nullptr || !IsMember(id)) continue;
    if (!w->waiting || w->after_generation >= generation_) return;
  }
  joiners_pending_ = false;
  joiners_.clear();
  // The elastic timeout for joining counts from now for the members told now.
  planned_at_ = absl::Now();
  Event(v1::JobEvent::INFO, absl::StrCat("the new workers of generation ", generation_,
                                         " are ready; the others join it now"));
  NotifyWorkers(/*abort=*/false);
}

void JobDriver::ArmBelowMinTimer(int available) {
  if (below_min_timer_ != 0) return;
  if (hosts_known_) {
    Event(v1::JobEvent::WARNING,
          absl::StrCat("only ", available, " worker(s) possible, below --min-np ",
                       spec_.min_np(), "; waiting up to --elastic-timeout ",
                       spec_.elastic_timeout_seconds(), "s for more slots"));
  }
  below_min_timer_ = loop_.PostAfter(
      absl::Seconds(spec_.elastic_timeout_seconds()), [this] {
        below_min_timer_ = 0;
        int usable = discovery::TotalSlots(hosts_.UsableHosts(absl::Now()));
        std::string why = absl::StrCat(
            "could not reach --min-np ", spec_.min_np(), " within --elastic-timeout ",
            spec_.elastic_timeout_seconds(), "s (", usable, " usable slot(s)");
        if (!last_discovery_error_.empty()) {
          absl::StrAppend(&why, "; discovery: ", last_discovery_error_);
        }
        Finish(v1::FAILED, why + ")");
      });
}

void JobDriver::NotifyWorkers(bool abort) {
  v1::DaemonMessage message;
  message.set_generation(generation_);
  message.set_abort(abort);
  for (auto& [id, w] : workers_) {
    if (w.channel && !w.gone()) w.channel->Send(message);
  }
}

void JobDriver::TryCompleteRendezvous() {
  if (Terminal() || generation_ == ready_generation_) return;
  if (static_cast<int>(members_.size()) < spec_.min_np()) return;
  auto waiting_for_this = [this](int64_t id) {
    const Worker& w = workers_.at(id);
    return w.waiting && w.after_generation < generation_;
  };
  for (; rendezvous_scan_ < members_.size(); ++rendezvous_scan_) {
    if (!waiting_for_this(members_[rendezvous_scan_])) return;
  }
  // Once per complete scan: someone seen waiting may have exited since.
  for (int64_t id : members_) {
    if (!waiting_for_this(id)) {
      rendezvous_scan_ = 0;
      return;
    }
  }
  // Only workers left since the last ready generation: they may shrink its
  // communicators (a worker of it that missed some generations in between
  // still has them).
  std::optional<std::vector<int>> removed = RemovedRanks(ready_members_, members_);
  shrinks_generation_ = removed.has_value() ? ready_generation_ : 0;
  excluded_ranks_ = removed.value_or(std::vector<int>());
  ready_generation_ = generation_;
  ready_members_ = members_;
  std::vector<std::string> hosts;
  hosts.reserve(members_.size());
  for (int64_t id : members_) hosts.push_back(workers_.at(id).host);
  rank_infos_ = AssignRanks(hosts);
  for (size_t rank = 0; rank < members_.size(); ++rank) {
    AnswerReady(workers_.at(members_[rank]), static_cast<int>(rank));
  }
  SetState(v1::RUNNING);
  std::string took;
  v1::JobEvent e;
  if (reset_detected_ != absl::InfinitePast()) {
    took = absl::StrCat(" (reset took ", Millis(absl::Now() - reset_detected_), ")");
    e.set_reset_seconds(absl::ToDoubleSeconds(absl::Now() - reset_detected_));
  }
  reset_detected_ = absl::InfinitePast();
  if (!reset_history_.empty() && reset_history_.back().generation() == generation_) {
    reset_history_.back().set_ready_unix(UnixSeconds(absl::Now()));
  }
  e.set_kind(v1::JobEvent::MEMBERSHIP);
  e.set_generation(generation_);
  e.set_size(static_cast<int>(members_.size()));
  e.set_message(absl::StrCat("generation ", generation_, " ready: size ", members_.size(),
                             " on ", absl::StrJoin(hosts, ","), took));
  events_.Append(std::move(e));
}

void JobDriver::AnswerReady(Worker& w, int rank) {
  if (rank < 0) rank = RankOf(w.id);
  const RankInfo& info = rank_infos_.at(rank);
  v1::RendezvousResponse response;
  response.set_generation(ready_generation_);
  response.set_rank(info.rank);
  response.set_size(info.size);
  response.set_local_rank(info.local_rank);
  response.set_local_size(info.local_size);
  response.set_cross_rank(info.cross_rank);
  response.set_cross_size(info.cross_size);
  // O(removed workers), never O(size): the answers of one generation add up
  // to O(size) (bench/README.md, daemon scale).
  if (shrinks_generation_ != 0) {
    response.set_shrinks_generation(shrinks_generation_);
    response.mutable_excluded_ranks()->Add(excluded_ranks_.begin(), excluded_ranks_.end());
  }
  response.set_bind_address(BindAddressFor(w.host));
  if (w.joined_generation != ready_generation_) w.generations_joined++;
  w.joined_generation = ready_generation_;
  w.state = v1::WORKER_RUNNING;
  w.rank->store(rank);
  w.waiting = false;
  auto reply = std::move(w.reply);
  w.reply = nullptr;
  if (reply) reply(std::move(response));
}

void JobDriver::AnswerRemoved(Worker& w) {
  w.state = v1::WORKER_REMOVED;
  if (!w.waiting) return;
  w.waiting = false;
  v1::RendezvousResponse response;
  response.set_generation(generation_);
  response.set_removed(true);
  auto reply = std::move(w.reply);
  w.reply = nullptr;
  if (reply) reply(std::move(response));
}

void JobDriver::OnWorkerExit(int64_t id, const ExitInfo& exit) {
  Worker* w = FindWorker(id);
  if (w == nullptr) return;
  w->handle = 0;
  w->launching = false;
  w->exit_code = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  if (w->waiting && w->reply) w->reply(absl::AbortedError("worker exited"));
  w->waiting = false;
  w->channel.reset();
  if (Terminal()) {
    if (w->state == v1::WORKER_RUNNING || w->state == v1::WORKER_STARTING) {
      w->state = exit.success() ? v1::WORKER_SUCCEEDED : v1::WORKER_FAILED;
    }
    MaybeCloseLog();
    return;
  }
  if (w->state == v1::WORKER_REMOVED) {
    Event(v1::JobEvent::INFO, absl::StrCat(Describe(*w), " left the job (", exit.Describe(), ")"));
    // The job may have been waiting for it to go before it can end.
    if (finishing_) MaybeFinishSucceeded(/*plain=*/false);
    return;
  }
  const bool in_ready = ready_generation_ > 0 && w->joined_generation == ready_generation_ &&
                        std::find(ready_members_.begin(), ready_members_.end(), id) !=
                            ready_members_.end();
  // A command that never uses the runtime (horovodrun -np 2 hostname) has no
  // ready generation: its planned members are the job.
  const bool plain = ready_generation_ == 0 && IsMember(id);
  if (exit.success() && w->lost_reason.empty() && (in_ready || plain)) {
    w->state = v1::WORKER_SUCCEEDED;
    if (!finishing_) {
      finishing_ = true;
      Event(v1::JobEvent::INFO, absl::StrCat(Describe(*w), " finished; the job is ending"));
      // Workers started for a generation that never formed are not needed.
      for (int64_t m : members_) {
        Worker& other = workers_.at(m);
        if (!plain && other.handle != 0 &&
            std::find(ready_members_.begin(), ready_members_.end(), m) == ready_members_.end()) {
          other.state = v1::WORKER_REMOVED;
          context_.launcher->Signal(other.handle, SIGTERM).IgnoreError();
        }
      }
    }
    MaybeFinishSucceeded(plain);
    return;
  }
  std::string what = exit.Describe();
  if (exit.success() && !in_ready) what = "exited with status 0 before joining the job";
  if (!w->lost_reason.empty()) what = absl::StrCat(w->lost_reason, " (", exit.Describe(), ")");
  OnWorkerFailed(*w, what);
}

void JobDriver::MaybeFinishSucceeded(bool plain) {
  // A member that failed before anyone finished was written off by the reset
  // that followed (a failure after that ends the job in OnWorkerFailed), and
  // one that a shrink removed is no longer needed: once they have exited, the
  // job succeeds with the members that finished.
  const auto& finishers = plain ? members_ : ready_members_;
  int finished = 0;
  for (int64_t m : finishers) {
    const Worker& w = workers_.at(m);
    if (w.state == v1::WORKER_SUCCEEDED) {
      ++finished;
    } else if (!((w.state == v1::WORKER_FAILED || w.state == v1::WORKER_REMOVED) &&
                 w.gone())) {
      return;
    }
  }
  std::string outcome = absl::StrCat(
      finished == static_cast<int>(finishers.size()) ? "all " : "", finished, " workers",
      plain ? "" : absl::StrCat(" of generation ", ready_generation_), " finished");
  if (finished != static_cast<int>(finishers.size())) {
    absl::StrAppend(&outcome, " (", finishers.size() - finished,
                    " had left or failed before)");
  }
  Finish(v1::SUCCEEDED, outcome);
}

void JobDriver::OnWorkerFailed(Worker& w, const std::string& what) {
  w.state = v1::WORKER_FAILED;
  const std::string description = absl::StrCat(Describe(w), " ", what);
  if (!spec_.elastic()) {
    Finish(v1::FAILED, description);
    return;
  }
  if (finishing_) {
    Finish(v1::FAILED, absl::StrCat(description, ", after other workers had finished"));
    return;
  }
  const absl::Time now = absl::Now();
  hosts_.ReportFailure(w.host, what, now);
  Event(v1::JobEvent::WARNING, absl::StrCat(description, "; host ", w.host, " in cooldown"),
        w.lost_reason.empty() ? "worker_failed" : "worker_lost");
  ScheduleCooldownWakeup();
  if (reset_detected_ == absl::InfinitePast()) reset_detected_ = now;
  Replan(description, /*failure=*/true);
}

void JobDriver::DeclareLost(Worker& w, const std::string& reason) {
  if (!w.lost_reason.empty() || w.handle == 0) return;
  w.lost_reason = reason;
  Event(v1::JobEvent::WARNING, absl::StrCat(Describe(w), " lost: ", reason, "; killing it"));
  if (reset_detected_ == absl::InfinitePast()) reset_detected_ = absl::Now();
  // Its sockets close when it dies, so peers blocked on it fail at once.
  context_.launcher->Signal(w.handle, SIGKILL).IgnoreError();
}

void JobDriver::CheckLiveness() {
  liveness_timer_ = 0;
  if (Terminal()) return;
  const absl::Time now = absl::Now();
  const absl::Duration silent_limit = absl::Seconds(spec_.liveness_timeout_seconds());
  const absl::Duration start_limit = absl::Seconds(spec_.start_timeout_seconds());
  const bool rendezvous_open = generation_ != ready_generation_;
  for (auto& [id, w] : workers_) {
    if (w.handle == 0 || w.state == v1::WORKER_REMOVED) continue;
    if (!w.attached && w.joined_generation == 0 && w.last_seen == w.launched_at) {
      if (now - w.launched_at > start_limit) {
        DeclareLost(w, absl::StrCat("did not connect within --start-timeout ",
                                    spec_.start_timeout_seconds(), "s"));
      }
      continue;
    }
    if (now - w.last_seen > silent_limit) {
      DeclareLost(w, absl::StrCat("silent for ", Millis(now - w.last_seen),
                                  " (--liveness-timeout ", spec_.liveness_timeout_seconds(),
                                  "s)"));
    } else if (rendezvous_open && !w.waiting &&
               now - planned_at_ > absl::Seconds(spec_.elastic_timeout_seconds()) &&
               IsMember(id) && Told(id)) {  // last: O(members) per worker
      DeclareLost(w, absl::StrCat("did not join generation ", generation_,
                                  " within --elastic-timeout ",
                                  spec_.elastic_timeout_seconds(), "s"));
    }
  }
  absl::Duration period = std::clamp(silent_limit / 4, absl::Milliseconds(50), absl::Seconds(1));
  liveness_timer_ = loop_.PostAfter(period, [this] { CheckLiveness(); });
}

void JobDriver::ScheduleCooldownWakeup() {
  if (cooldown_timer_ != 0) loop_.Cancel(cooldown_timer_);
  cooldown_timer_ = 0;
  absl::Time next = hosts_.NextCooldownEnd(absl::Now());
  if (next == absl::InfiniteFuture()) return;
  cooldown_timer_ = loop_.PostAt(next + absl::Milliseconds(1), [this] {
    cooldown_timer_ = 0;
    Replan("a host's cooldown ended", /*failure=*/false);
    ScheduleCooldownWakeup();
  });
}

JobDriver::Worker* JobDriver::FindWorker(int64_t id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

bool JobDriver::IsMember(int64_t id) const {
  return std::find(members_.begin(), members_.end(), id) != members_.end();
}

int JobDriver::RankOf(int64_t id) const {
  auto it = std::find(ready_members_.begin(), ready_members_.end(), id);
  return it == ready_members_.end() ? -1 : static_cast<int>(it - ready_members_.begin());
}

std::string JobDriver::Describe(const Worker& w) const {
  int rank = RankOf(w.id);
  return absl::StrCat("worker ", w.id, " (", rank >= 0 ? absl::StrCat("rank ", rank, ", ") : "",
                      w.host, w.handle != 0 ? absl::StrCat(", pid ", w.pid) : "", ")");
}

}  // namespace horovodd::daemon
