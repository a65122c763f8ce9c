#include "daemon/workers/worker_table.h"

#include <algorithm>

#include "common/check.h"

namespace horovodd::daemon {

void Worker::Refuse(const absl::Status& status) {
  auto pending = std::move(reply);
  reply = nullptr;
  const bool was_waiting = waiting;
  waiting = false;
  if (was_waiting && pending) pending(status);
}

void Worker::Answer(v1::RendezvousResponse response) {
  auto pending = std::move(reply);
  reply = nullptr;
  waiting = false;
  if (pending) pending(std::move(response));
}

Worker& WorkerTable::Add(const std::string& host, int planned_rank) {
  const int64_t id = next_id_++;
  Worker& w = workers_[id];
  w.id = id;
  w.host = host;
  w.rank = std::make_shared<std::atomic<int>>(planned_rank);
  return w;
}

Worker& WorkerTable::Restore(int64_t id, const std::string& host, int rank) {
  HVDD_CHECK_GT(id, 0);
  next_id_ = std::max(next_id_, id + 1);
  Worker& w = workers_[id];
  w.id = id;
  w.host = host;
  w.rank = std::make_shared<std::atomic<int>>(rank);
  return w;
}

void WorkerTable::Erase(int64_t id) { workers_.erase(id); }

Worker* WorkerTable::Find(int64_t id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

const Worker* WorkerTable::Find(int64_t id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

Worker& WorkerTable::at(int64_t id) {
  Worker* w = Find(id);
  HVDD_CHECK(w != nullptr) << "no worker " << id;
  return *w;
}

const Worker& WorkerTable::at(int64_t id) const {
  const Worker* w = Find(id);
  HVDD_CHECK(w != nullptr) << "no worker " << id;
  return *w;
}

void WorkerTable::Started(Worker& w, const LaunchedProcess& process) {
  w.handle = process.handle;
  w.pid = process.pid;
}

void WorkerTable::Exited(Worker& w, const ExitInfo& exit) {
  w.handle = 0;
  w.launching = false;
  w.exit_code = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  w.Refuse(absl::AbortedError("worker exited"));
  w.channel.reset();
  w.activity.reset();
}

void WorkerTable::Reported(Worker& w, v1::WorkerActivity activity, absl::Time now) {
  w.activity = std::move(activity);
  w.activity_at = now;
}

bool WorkerTable::AllGone() const {
  for (const auto& [id, w] : workers_) {
    if (!w.gone()) return false;
  }
  return true;
}

void WorkerTable::SignalAll(Launcher* launcher, int signal) const {
  for (const auto& [id, w] : workers_) {
    if (w.handle != 0) launcher->Signal(w.handle, signal).IgnoreError();
  }
}

void WorkerTable::SendToAttached(const v1::DaemonMessage& message) const {
  ChannelBatch batch;  // one write per host stream
  for (const auto& [id, w] : workers_) {
    if (w.channel && !w.gone()) w.channel->Send(message);
  }
}

std::function<void(OutputStream, std::string_view)> WorkerTable::OutputSink(const Worker& w,
                                                                            EventLog* events) {
  return [events, rank = w.rank](OutputStream stream, std::string_view line) {
    v1::JobEvent e;
    e.set_kind(v1::JobEvent::OUTPUT);
    e.set_rank(rank->load());
    e.set_stream(stream == OutputStream::kStdout ? "stdout" : "stderr");
    e.set_message(std::string(line));
    events->Append(std::move(e));
  };
}

}  // namespace horovodd::daemon
