// Runs processes on this host for the daemon and watches them all from ONE
// I/O thread: an epoll over the stdout/stderr pipes and a pidfd of every
// child. That thread also forks every child (the parent-death signal follows
// the forking thread, so it must be one that lives as long as the launcher),
// reaps it, and runs its callbacks, never holding the launcher's lock.
//
// A process runs in its own process group. When it exits, whatever is left of
// its group (helpers, a shell's background jobs) is killed with SIGKILL before
// it is reaped, so no worker leaves orphans. If the daemon dies, its children
// die with it (PR_SET_PDEATHSIG).
//
// The daemon must not ignore SIGCHLD, nor reap children it did not start
// (waitpid(-1)): the launcher collects each exit status itself.
//
// As a Launcher it runs every launch here, whatever its host and route, and
// a process's handle is its pid.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/launch/launcher.h"
#include "daemon/launch/process_types.h"

namespace horovodd::daemon {

struct ExecPlan;

struct LocalLauncherOptions {
  // A descendant that left the process group may keep the pipes open after
  // the process exited. Its output is still collected for this long; then the
  // pipes are closed and on_exit runs.
  absl::Duration output_linger = absl::Seconds(2);
};

class LocalLauncher final : public Launcher {
 public:
  // FAILED_PRECONDITION when pidfd_open is missing (Linux < 5.3) or SIGCHLD
  // is ignored (exit statuses could not be collected).
  static absl::StatusOr<std::unique_ptr<LocalLauncher>> Create(
      const LocalLauncherOptions& options = {});
  // Kills (SIGKILL) every child still running, reaps it, runs its on_exit,
  // joins the I/O thread. No orphans. Not from inside a callback.
  ~LocalLauncher() override;
  LocalLauncher(const LocalLauncher&) = delete;
  LocalLauncher& operator=(const LocalLauncher&) = delete;

  // Starts launch.spec in its own process group, stdin from /dev/null, no
  // other inherited descriptors. Returns once exec succeeded. Fails (and then
  // calls no callback) with INVALID_ARGUMENT for a bad spec, or with the code
  // of exec's errno, e.g. NOT_FOUND "cannot execute 'x': No such file or
  // directory", or when the working directory cannot be entered. May be
  // called from any thread, callbacks included.
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override;

  // Sends sig to the child's whole process group (its own children too).
  // NOT_FOUND if the pid is unknown or already reaped.
  absl::Status Signal(int64_t pid, int sig) override;

  // SIGTERM to every process group started so far, SIGKILL to those still
  // alive after `grace`; returns when all of them are reaped and their on_exit
  // callbacks ran. Processes launched meanwhile are not waited for. Not from
  // inside a callback.
  void TerminateAll(absl::Duration grace) override;

  // False: the children die with the daemon (PR_SET_PDEATHSIG).
  bool DetachAll() override { return false; }

  // Processes started and not yet reaped (an on_exit may still be on its way).
  size_t running() const override;

 private:
  struct Child;
  struct LaunchRequest;
  enum class ReadResult { kData, kNothingNow, kClosed };

  LocalLauncher(const LocalLauncherOptions& options, UniqueFd epoll_fd, UniqueFd wake_fd,
                UniqueFd dev_null);

  // Everything below runs on the I/O thread.
  void Loop();
  void RunLaunchRequests();
  absl::StatusOr<pid_t> StartChild(const ExecPlan& plan, ProcessCallbacks callbacks);
  absl::Status Watch(int fd, uint64_t key);
  void HandleOutput(uint64_t id, OutputStream stream);
  void HandleExit(uint64_t id);
  // One read() from the pipe, its lines handed out; closes the pipe at EOF.
  ReadResult ReadOnce(Child& child, OutputStream stream);
  // Reads what the pipes hold now (a bounded amount), closing those at EOF.
  void DrainNow(Child& child);
  void CloseStream(Child& child, OutputStream stream);
  void FinishIfDrained(uint64_t id);
  void Finish(uint64_t id);
  void ExpireLingering();
  int MillisUntilNextLingerDeadline() const;
  ExitInfo Reap(pid_t pid);

  void Wake();
  void SignalGroups(const std::set<uint64_t>& ids, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LocalLauncherOptions options_;
  const UniqueFd epoll_fd_;
  const UniqueFd wake_fd_;   // eventfd: launch requests or quit
  const UniqueFd dev_null_;  // every child's stdin

  mutable absl::Mutex mu_;
  // Not yet reaped: pid -> child id. While a pid is here it cannot be reused,
  // so signals sent under mu_ to -pid reach our process group only.
  std::map<pid_t, uint64_t> live_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> unfinished_ ABSL_GUARDED_BY(mu_);        // ids whose on_exit has not run
  std::deque<LaunchRequest*> requests_ ABSL_GUARDED_BY(mu_);  // forks asked by other threads
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // destructor started: launch nothing new
  bool quit_ ABSL_GUARDED_BY(mu_) = false;      // the I/O thread leaves its loop

  // Owned by the I/O thread; no lock.
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Child>> children_;
  std::map<uint64_t, absl::Time> lingering_;  // exited, pipes still open: id -> give-up time
  std::vector<char> read_buffer_;

  std::thread io_thread_;
};

}  // namespace horovodd::daemon
