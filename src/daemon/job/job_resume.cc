// JobDriver across a daemon restart: Abandon leaves the job running, and
// Resume has a restarted daemon take it back from its newest checkpoint
// (written by the checkpointer, job_checkpointer.h) and the workers its
// shims still hold, without a new generation when nothing changed meanwhile
// (the workers never notice the daemon was gone).
#include <algorithm>
#include <csignal>
#include <deque>
#include <future>

#include "absl/strings/str_cat.h"
#include "daemon/job/job_checkpointer.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

absl::Time FromUnixSeconds(double seconds) {
  return seconds > 0 ? absl::FromUnixMicros(static_cast<int64_t>(seconds * 1e6)) : absl::Time();
}

bool Alive(v1::WorkerState state) {
  return state == v1::WORKER_STARTING || state == v1::WORKER_RUNNING ||
         state == v1::WORKER_SPARE_STARTING || state == v1::WORKER_SPARE_READY;
}

}  // namespace

void JobDriver::Abandon() {
  hosts_.StopDiscovery();
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
  starter_.Shutdown();
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
                          const std::vector<ReattachedWorker>& found, absl::Duration daemon_away,
                          absl::Duration worker_grace,
                          std::map<int64_t, ProcessCallbacks>& callbacks) {
  const v1::JobStatus& was = checkpoint.status;
  events_.ContinueAt(checkpoint.last_event_seq + 1);
  std::deque<v1::ResetRecord> records(was.reset_history().begin(), was.reset_history().end());
  resets_.Restore(was.resets(), was.last_commit(), std::move(records));

  std::map<int64_t, const ReattachedWorker*> held;
  for (const ReattachedWorker& r : found) held[r.worker_id] = &r;

  // The workers as the checkpoint had them; members of the ready generation
  // in rank order.
  std::vector<std::pair<int, int64_t>> ranked;
  std::vector<int64_t> lost;
  int running = 0;
  bool a_member_finished = false;
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
    if (w.state == v1::WORKER_SUCCEEDED) a_member_finished = true;
    if (!Alive(w.state)) continue;
    // A spare's wait to join went with the old daemon: ready again once it asks anew.
    if (IsSpare(w)) w.state = v1::WORKER_SPARE_STARTING;
    auto it = held.find(w.id);
    if (it == held.end()) {
      lost.push_back(w.id);
      continue;
    }
    WorkerTable::Started(w, it->second->process);
    liveness_.Reattached(w.id, clock_.Now());
    callbacks[w.id] = starter_.CallbacksFor(w);
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
                       checkpoint.planned_members, workers_, clock_.Now());
  // With a ready generation the job trains on; a reset that was under way
  // is taken up again when its workers ask for their rendezvous anew.
  absl::Time started = FromUnixSeconds(was.started_unix());
  if (started == absl::Time()) started = clock_.Now();
  lifecycle_.Restore(!members.empty()
                         ? v1::RUNNING
                         : (was.state() == v1::JOB_STATE_UNSPECIFIED ? v1::PENDING : was.state()),
                     started, generations_.generation());
  goodput_.Restore(was.goodput(), started, !members.empty(), clock_.Now());
  recorder_.Record(v1::JobEvent::INFO,
                   absl::StrCat("taken back after a horovodd restart: generation ",
                                was.generation(), ", ", held.size(), " worker(s) found, ",
                                lost.size(), " lost, last commit ", was.last_commit()));
  // A worker's grace counts from its last contact, which is at most a
  // heartbeat interval (a quarter of the grace) before the daemon went.
  if (running == 0 && !a_member_finished && !held.empty() && daemon_away >= worker_grace * 3 / 4) {
    // They gave up waiting for a daemon (DaemonClient's grace period).
    end_.Finish(v1::FAILED,
                absl::StrCat("horovodd was away for ",
                             absl::FormatDuration(absl::Trunc(daemon_away, absl::Seconds(1))),
                             ", longer than the workers' grace period (worker.daemon_grace = ",
                             absl::FormatDuration(worker_grace), "): they ended"));
    return;
  }
  // The hosts as they were, until discovery says otherwise.
  if (JobCheckpointer::RestoreHosts(checkpoint, hosts_.manager())) lifecycle_.HostsFound();
  // No new generation once a member finished.
  if (a_member_finished && !lifecycle_.Terminal()) lifecycle_.StartFinishing();
  hosts_.ScheduleCooldownWakeup();
  for (int64_t id : lost) {
    Worker& w = workers_.at(id);
    w.lost_reason = "its shim was not found after horovodd restarted";
    if (IsSpare(w)) {
      ExitInfo unknown;
      unknown.exit_code = -1;  // its status went with the shim
      OnSpareExit(w, unknown);
    } else {
      OnWorkerFailed(w, w.lost_reason);
    }
    if (lifecycle_.Terminal()) return;
  }
  hosts_.StartDiscovery();
  if (lifecycle_.Terminal()) return;
  WatchLiveness();
  WatchStalls();
}

}  // namespace horovodd::daemon
