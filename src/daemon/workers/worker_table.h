// The workers of one job, past and present: their processes (launcher
// handle, pid, exit), their Attach streams, their pending rendezvous calls
// and the rank their output lines carry. Who is a member of which
// generation is GenerationPlanner's; when a worker was last heard from is
// LivenessMonitor's.
//
// Threading: owned by one JobDriver and used only on its loop thread, except
// Worker::rank, which the launcher's I/O thread reads for output lines.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/job_events/event_log.h"
#include "daemon/launch/launcher.h"
#include "daemon/workers/worker_channel.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

struct Worker {
  using RendezvousReply = std::function<void(absl::StatusOr<v1::RendezvousResponse>)>;

  int64_t id = 0;
  std::string host;
  int64_t handle = 0;  // the launcher's; 0 once ended
  int pid = 0;         // on its host, for people
  v1::WorkerState state = v1::WORKER_STARTING;
  int exit_code = 0;
  std::string lost_reason;                      // set when the driver killed it
  absl::Time exited_at = absl::InfinitePast();  // when the launcher saw it exit
  int64_t joined_generation = 0;                // last ready generation it was part of
  int64_t last_commit = 0;
  int64_t reported_failure_generation = 0;
  int generations_joined = 0;
  bool attached = false;
  // Being started on a remote host: no handle yet, but not gone either.
  bool launching = false;
  std::shared_ptr<WorkerChannel> channel;
  bool waiting = false;  // has a rendezvous call pending
  int64_t after_generation = 0;
  RendezvousReply reply;
  std::shared_ptr<std::atomic<int>> rank;  // read by the launcher's I/O thread
  // What it last reported doing (its heartbeats), and when that arrived
  // (the daemon's clock); none once it has exited.
  std::optional<v1::WorkerActivity> activity;
  absl::Time activity_at;

  // No process, and none on its way.
  bool gone() const { return handle == 0 && !launching; }
  // Answers the pending rendezvous call (if any) with `status`; none is pending after.
  void Refuse(const absl::Status& status);
  // Answers the pending rendezvous call (if any) with `response`; none is pending after.
  void Answer(v1::RendezvousResponse response);
};

class WorkerTable {
 public:
  using Map = std::map<int64_t, Worker>;

  // A new worker, not yet started, on `host`; its output carries
  // `planned_rank` until it gets a rank. Ids count up from 1, never reused.
  Worker& Add(const std::string& host, int planned_rank);
  // A worker an earlier run of the daemon had, under its old id (a job taken
  // back after a restart); later ids count on past it.
  Worker& Restore(int64_t id, const std::string& host, int rank);
  // Forgets a worker that never started.
  void Erase(int64_t id);
  Worker* Find(int64_t id);
  const Worker* Find(int64_t id) const;
  // A worker known to exist (an invariant of the caller).
  Worker& at(int64_t id);
  const Worker& at(int64_t id) const;

  // The launcher started `w`.
  static void Started(Worker& w, const LaunchedProcess& process);
  // `w`'s process ended: no handle, no stream, its pending call refused,
  // no activity.
  static void Exited(Worker& w, const ExitInfo& exit);
  // `w` reported `activity` (checked: ValidateWorkerActivity) at `now`: it
  // replaces the one before.
  static void Reported(Worker& w, v1::WorkerActivity activity, absl::Time now);

  // Whether no worker has a process or one on its way.
  bool AllGone() const;
  // Sends `signal` to every worker that has a process.
  void SignalAll(Launcher* launcher, int signal) const;
  // Sends `message` on the Attach stream of every worker that has one and a
  // process; in one batch (ChannelBatch), so a host's stream writes it once.
  void SendToAttached(const v1::DaemonMessage& message) const;

  // What the launcher calls with each output line of `w`: an OUTPUT event
  // with w's rank at that moment. `events` outlives the worker's process.
  static std::function<void(OutputStream, std::string_view)> OutputSink(const Worker& w,
                                                                        EventLog* events);

  Map::iterator begin() { return workers_.begin(); }
  Map::iterator end() { return workers_.end(); }
  Map::const_iterator begin() const { return workers_.begin(); }
  Map::const_iterator end() const { return workers_.end(); }

 private:
  Map workers_;
  int64_t next_id_ = 1;
};

}  // namespace horovodd::daemon
