// When one job's checkpoint goes to the journal (through
// JobObserver::OnJobCheckpoint), what goes into it, and what a restarted
// daemon reads back out of it for the job's hosts. A checkpoint holds the
// job's status (workers with pid, host, rank and state; hosts; resets; the
// ready generation), the newest generation planned with its members, and the
// hosts' failure history.
//
// A change a restart must not lose (an event, a change of state) is written
// once the loop closure running now is done: one write for all it changed.
// Commit reports come from every worker at every commit: at most one write
// per kCommitInterval for them (the workers hold the commits themselves; the
// count is for operators and the reset history). Nothing is written when the
// context has checkpoints off or no observer, nor once the job has ended.
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <functional>

#include "absl/time/time.h"
#include "daemon/job/job_context.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/loop/event_loop.h"
#include "daemon/membership/generation_planner.h"
#include "discovery/host_manager.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobCheckpointer {
 public:
  static constexpr absl::Duration kCommitInterval = absl::Milliseconds(100);

  // `status` is the job's status now. Everything given outlives the
  // checkpointer; `loop` runs the writes.
  JobCheckpointer(const JobContext& context, EventLoop& loop, const JobLifecycle& lifecycle,
                  const GenerationPlanner& generations, const discovery::HostManager& hosts,
                  std::function<v1::JobStatus()> status);

  // Something a restart must not lose changed: written after the running closure.
  void Changed();
  // A worker reported a commit: written within kCommitInterval.
  void Committed();

  // Gives `hosts` those `checkpoint` had (not the lost ones: discovery says
  // whether they came back), drained as they were, with their failure
  // history: a cooldown ends when it would have had the daemon stayed.
  // Whether any host was known.
  static bool RestoreHosts(const JobCheckpoint& checkpoint, discovery::HostManager& hosts);

 private:
  bool Off() const;
  void Write();

  const JobContext& context_;
  EventLoop& loop_;
  const JobLifecycle& lifecycle_;
  const GenerationPlanner& generations_;
  const discovery::HostManager& hosts_;
  const std::function<v1::JobStatus()> status_;
  bool write_posted_ = false;
  EventLoop::TimerId commit_timer_ = 0;
  absl::Time last_write_ = absl::InfinitePast();
};

}  // namespace horovodd::daemon
