// JobDriver: what survives a daemon restart. The checkpoints a journal keeps
// (after every event and, at most once a second, commits), and Resume: a
// restarted daemon takes a running job back from its newest checkpoint and
// the workers its shims still hold, without a new generation when nothing
// changed meanwhile (the workers never notice the daemon was gone).
#include <algorithm>
#include <csignal>
#include <future>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/job/discovery_poller.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

// Commit reports come from every worker at every commit: at most one
// checkpoint per this for them (the workers hold the commits themselves; the
// count is for operators and the reset history).
constexpr absl::Duration kCommitCheckpointInterval = absl::Milliseconds(100);

absl::Time FromUnixSeconds(double seconds) {
  return seconds > 0 ? absl::FromUnixMicros(static_cast<int64_t>(seconds * 1e6))
                     : absl::Time();
}

bool Alive(v1::WorkerState state) {
  return state == v1::WORKER_STARTING || state == v1::WORKER_RUNNING;
}

}  // namespace

void JobDriver::RequestCheckpoint(bool urgent) {
  if (!context_.checkpoints || context_.observer == nullptr || ended_.load()) return;
  if (urgent) {
    if (checkpoint_posted_) return;
    // After the running closure: one write for everything it changed.
    checkpoint_posted_ = loop_.Post([this] {
      checkpoint_posted_ = false;
      WriteCheckpoint();
    });
    return;
  }
  if (checkpoint_timer_ != 0 || checkpoint_posted_) return;
  const absl::Time due = last_checkpoint_ + kCommitCheckpointInterval;
  if (Now() >= due) {
    RequestCheckpoint(/*urgent=*/true);
    return;
  }
  checkpoint_timer_ = loop_.PostAt(due, [this] {
    checkpoint_timer_ = 0;
    WriteCheckpoint();
  });
}

void JobDriver::WriteCheckpoint() {
  if (context_.observer == nullptr || ended_.load()) return;
  last_checkpoint_ = Now();
  JobCheckpoint checkpoint;
  checkpoint.status = StatusNow();
  checkpoint.status.clear_recent_events();  // the journal has them
  checkpoint.status.clear_spec();           // and this
  checkpoint.planned_generation = generations_.generation();
  checkpoint.planned_members = generations_.members();
  const absl::Time now = Now();
  for (const discovery::HostInfo& h : hosts_.Hosts(now)) {
    if (h.failures == 0 && h.cooldowns == 0) continue;
    HostCooldown& c = checkpoint.host_cooldowns.emplace_back();
    c.host = h.host;
    c.failures = h.failures;
    c.cooldowns = h.cooldowns;
    c.last_failure = h.last_failure;
    c.until = h.cooldown_left == absl::ZeroDuration() ? absl::InfinitePast()
                                                      : now + h.cooldown_left;
  }
  context_.observer->OnJobCheckpoint(context_.job_id, checkpoint);
}

ProcessCallbacks JobDriver::CallbacksFor(const Worker& w) {
  ProcessCallbacks callbacks;
  callbacks.on_line = WorkerTable::OutputSink(w, &events_);
  callbacks.on_exit = [this, id = w.id](const ExitInfo& exit) {
    loop_.Post([this, id, exit] { OnWorkerExit(id, exit); });
  };
  return callbacks;
}

void JobDriver::Abandon() {
  poller_.reset();
  // Stopped from inside the loop: whatever it was deciding is done, and
  // nothing after this is.
  auto stopped = std::make_shared<std::promise<void>>();
  auto done = stopped->get_future();
  if (loop_.Post([this, stopped] {
        loop_.Stop();
        stopped->set_value();
      })) {
    done.wait_for(std::chrono::seconds(10));
  }
  launches_.Shutdown();
}

std::map<int64_t, ProcessCallbacks> JobDriver::Resume(const JobCheckpoint& checkpoint,
                                                      const std::vector<ReattachedWorker>& found,
                                                      absl::Duration daemon_away,
                                                      absl::Duration worker_grace) {
  auto done = std::make_shared<std::promise<std::map<int64_t, ProcessCallbacks>>>();
  auto future = done->get_future();
  const bool posted = loop_.Post([&, done] {
    std::map<int64_t, ProcessCallbacks> callbacks;
    ResumeNow(checkpoint, found, daemon_away, worker_grace, callbacks);
    done->set_value(std::move(callbacks));
  });
  if (!posted) return {};
  return future.get();
}

void JobDriver::ResumeNow(const JobCheckpoint& checkpoint,
                          const std::vector<ReattachedWorker>& found,
                          absl::Duration daemon_away, absl::Duration worker_grace,
                          std::map<int64_t, ProcessCallbacks>& callbacks) {
  const v1::JobStatus& was = checkpoint.status;
  events_.ContinueAt(checkpoint.last_event_seq + 1);
  started_ = FromUnixSeconds(was.started_unix());
  if (started_ == absl::Time()) started_ = Now();
  std::deque<v1::ResetRecord> records(was.reset_history().begin(), was.reset_history().end());
  resets_.Restore(was.resets(), was.last_commit(), std::move(records));

  std::map<int64_t, const ReattachedWorker*> held;
  for (const ReattachedWorker& r : found) held[r.worker_id] = &r;

  // The workers as the checkpoint had them; members of the ready generation
  // in rank order.
  std::vector<std::pair<int, int64_t>> ranked;
  std::vector<int64_t> lost;
  int running = 0;
  for (const v1::WorkerStatus& ws : was.workers()) {
    Worker& w = workers_.Restore(ws.worker_id(), ws.host(), ws.rank());
    w.pid = ws.pid();
    w.state = ws.state();
    w.exit_code = ws.exit_code();
    w.last_commit = ws.last_commit();
    w.generations_joined = ws.resets() + (ws.rank() >= 0 || ws.resets() > 0 ? 1 : 0);
    if (ws.rank() >= 0) {
      w.joined_generation = was.generation();
      ranked.emplace_back(ws.rank(), w.id);
    }
    if (w.state == v1::WORKER_SUCCEEDED) finishing_ = true;
    if (!Alive(w.state)) continue;
    auto it = held.find(w.id);
    if (it == held.end()) {
      lost.push_back(w.id);
      continue;
    }
    WorkerTable::Started(w, it->second->process);
    liveness_.Reattached(w.id, Now());
    callbacks[w.id] = CallbacksFor(w);
    if (!it->second->exited) ++running;
  }
  // A worker started after the newest checkpoint: nobody knows its place in
  // the job, so it goes.
  for (const ReattachedWorker& r : found) {
    if (workers_.Find(r.worker_id) != nullptr) continue;
    callbacks[r.worker_id] = ProcessCallbacks{};
    if (!r.exited) context_.launcher->Signal(r.process.handle, SIGKILL).IgnoreError();
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int64_t> members;
  for (const auto& [rank, id] : ranked) members.push_back(id);
  generations_.Restore(was.generation(), members, checkpoint.planned_generation,
                       checkpoint.planned_members, workers_, Now());
  // With a ready generation the job trains on; a reset that was under way
  // is taken up again when its workers ask for their rendezvous anew.
  SetState(!members.empty() ? v1::RUNNING
                            : (was.state() == v1::JOB_STATE_UNSPECIFIED ? v1::PENDING : was.state()));
  Event(v1::JobEvent::INFO,
        absl::StrCat("taken back after a horovodd restart: generation ", was.generation(), ", ",
                     held.size(), " worker(s) found, ", lost.size(), " lost, last commit ",
                     was.last_commit()));
  // A worker's grace counts from its last contact, which is at most a
  // heartbeat interval (a quarter of the grace) before the daemon went.
  if (running == 0 && !finishing_ && !held.empty() && daemon_away >= worker_grace * 3 / 4) {
    // They gave up waiting for a daemon (DaemonClient's grace period).
    Finish(v1::FAILED,
           absl::StrCat("horovodd was away for ", absl::FormatDuration(absl::Trunc(daemon_away, absl::Seconds(1))),
                        ", longer than the workers' grace period (worker.daemon_grace = ",
                        absl::FormatDuration(worker_grace), "): they ended"));
    return;
  }
  // The hosts as they were, until discovery says otherwise (its first
  // answer then changes nothing unless the hosts did), with their failure
  // history: a cooldown ends when it would have had the daemon stayed.
  discovery::HostSet known;
  std::vector<std::string> drained;
  for (const v1::HostStatus& h : was.hosts()) {
    if (h.state() == "lost") continue;
    known.push_back({h.host(), h.slots()});
    if (h.state() == "drained") drained.push_back(h.host());
  }
  if (!known.empty()) {
    std::sort(known.begin(), known.end(),
              [](const auto& a, const auto& b) { return a.host < b.host; });
    hosts_.UpdateDiscovered(known);
    for (const std::string& host : drained) hosts_.Drain(host);
    hosts_known_ = true;
  }
  for (const HostCooldown& c : checkpoint.host_cooldowns) {
    hosts_.RestoreFailures(c.host, c.failures, c.cooldowns, c.last_failure, c.until);
  }
  ScheduleCooldownWakeup();
  for (int64_t id : lost) {
    Worker& w = workers_.at(id);
    w.lost_reason = "its shim was not found after horovodd restarted";
    OnWorkerFailed(w, w.lost_reason);
    if (Terminal()) return;
  }
  StartDiscovery();
  CheckLiveness();
}

}  // namespace horovodd::daemon
