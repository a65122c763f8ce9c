#include "daemon/launch/local_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/launch/line_splitter.h"
#include "daemon/launch/spawn_process.h"

namespace horovodd::daemon {
namespace {

// An epoll key is a child id and what its descriptor carries.
enum Tag : uint64_t { kStdoutTag = 0, kStderrTag = 1, kExitTag = 2, kWakeTag = 3 };
constexpr uint64_t kWakeKey = kWakeTag;  // id 0 is never a child's
constexpr int kMaxEvents = 64;
constexpr size_t kReadChunk = 64 * 1024;  // one read() per ready pipe, for fairness
// Enough reads to empty a full pipe (1 MiB, the default pipe-max-size) and no
// more, so a descendant that keeps writing cannot hold the I/O thread.
constexpr int kMaxDrainReads = 16;

uint64_t Key(uint64_t id, Tag tag) { return id << 2 | tag; }

const char* ErrnoText(int error) {
  const char* text = strerrordesc_np(error);
  return text ? text : "unknown error";
}

absl::Status ErrnoStatus(absl::string_view what) {
  const int error = errno;
  return absl::Status(absl::ErrnoToStatusCode(error), absl::StrCat(what, ": ", ErrnoText(error)));
}

struct Pipe {
  UniqueFd read;   // the launcher's end: non-blocking
  UniqueFd write;  // the child's end: above 2
};

absl::StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("cannot create an output pipe");
  Pipe pipe;
  pipe.read.Reset(fds[0]);
  UniqueFd write(fds[1]);
  // The child's end must block: programs do not expect EAGAIN on stdout.
  if (fcntl(write.get(), F_SETFL, 0) != 0) return ErrnoStatus("cannot make a pipe blocking");
  HVDD_ASSIGN_OR_RETURN(UniqueFd moved, MoveAboveStdio(std::move(write)));
  pipe.write = std::move(moved);
  return pipe;
}

// Used when a child cannot be watched: it must not run unseen or stay a zombie.
void KillAndReap(pid_t pid) {
  kill(-pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

struct LocalLauncher::Child {
  pid_t pid = 0;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  UniqueFd pidfd;
  LineSplitter stdout_lines;
  LineSplitter stderr_lines;
  ProcessCallbacks callbacks;
  std::optional<ExitInfo> exit;  // set once reaped

  UniqueFd& fd(OutputStream stream) {
    return stream == OutputStream::kStdout ? stdout_fd : stderr_fd;
  }
  LineSplitter& lines(OutputStream stream) {
    return stream == OutputStream::kStdout ? stdout_lines : stderr_lines;
  }
  LineSplitter::Emit Emitter(OutputStream stream) {
    return [this, stream](std::string_view line) {
      if (callbacks.on_line) callbacks.on_line(stream, line);
    };
  }
};

// A Launch() from another thread, handed to the I/O thread; lives on the
// caller's stack until `result` is set.
struct LocalLauncher::LaunchRequest {
  const ExecPlan* plan;
  ProcessCallbacks callbacks;
  std::promise<absl::StatusOr<pid_t>> result;
};

absl::StatusOr<std::unique_ptr<LocalLauncher>> LocalLauncher::Create(
    const LocalLauncherOptions& options) {
  UniqueFd probe(static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)));
  if (!probe.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("pidfd_open is not available (Linux >= 5.3 is needed): ", ErrnoText(errno)));
  }
  struct sigaction sigchld = {};
  sigaction(SIGCHLD, nullptr, &sigchld);
  if (sigchld.sa_handler == SIG_IGN || (sigchld.sa_flags & SA_NOCLDWAIT) != 0) {
    return absl::FailedPreconditionError(
        "SIGCHLD is ignored (SIG_IGN or SA_NOCLDWAIT): exit statuses could not be collected");
  }
  UniqueFd epoll_fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) return ErrnoStatus("cannot create an epoll instance");
  UniqueFd wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd.valid()) return ErrnoStatus("cannot create an eventfd");
  UniqueFd opened(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!opened.valid()) return ErrnoStatus("cannot open /dev/null");
  HVDD_ASSIGN_OR_RETURN(UniqueFd dev_null, MoveAboveStdio(std::move(opened)));

  std::unique_ptr<LocalLauncher> launcher(
      new LocalLauncher(options, std::move(epoll_fd), std::move(wake_fd), std::move(dev_null)));
  if (absl::Status watched = launcher->Watch(launcher->wake_fd_.get(), kWakeKey); !watched.ok()) {
    return watched;
  }
  // Signals for the daemon must not land on the I/O thread; the thread starts
  // with all of them blocked (children get an empty mask back before exec).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  launcher->io_thread_ = std::thread(&LocalLauncher::Loop, launcher.get());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return launcher;
}

LocalLauncher::LocalLauncher(const LocalLauncherOptions& options, UniqueFd epoll_fd,
                             UniqueFd wake_fd, UniqueFd dev_null)
    : options_(options),
      epoll_fd_(std::move(epoll_fd)),
      wake_fd_(std::move(wake_fd)),
      dev_null_(std::move(dev_null)),
      read_buffer_(kReadChunk) {}

LocalLauncher::~LocalLauncher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    SignalGroups(unfinished_, SIGKILL);
    mu_.Await(absl::Condition(
        +[](std::set<uint64_t>* ids) { return ids->empty(); }, &unfinished_));
    quit_ = true;
  }
  Wake();
  io_thread_.join();
}

absl::StatusOr<LaunchedProcess> LocalLauncher::Launch(const WorkerLaunch& launch,
                                                      ProcessCallbacks callbacks) {
  HVDD_ASSIGN_OR_RETURN(ExecPlan plan, ExecPlan::Create(launch.spec));
  absl::StatusOr<pid_t> pid;
  if (std::this_thread::get_id() == io_thread_.get_id()) {
    pid = StartChild(plan, std::move(callbacks));  // from a callback
  } else {
    LaunchRequest request{&plan, std::move(callbacks), {}};
    std::future<absl::StatusOr<pid_t>> result = request.result.get_future();
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(&request);
    }
    Wake();
    pid = result.get();
  }
  if (!pid.ok()) return pid.status();
  return LaunchedProcess{*pid, *pid};
}

absl::Status LocalLauncher::Signal(int64_t pid, int sig) {
  absl::MutexLock lock(&mu_);
  if (live_.count(static_cast<pid_t>(pid)) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no running process with pid ", pid, " was started by this launcher"));
  }
  if (kill(-static_cast<pid_t>(pid), sig) != 0) {
    return ErrnoStatus(absl::StrCat("cannot send signal ", sig, " to process group ", pid));
  }
  return absl::OkStatus();
}

void LocalLauncher::TerminateAll(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  const std::set<uint64_t> targets = unfinished_;
  const auto all_finished = [this, &targets]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::none_of(targets.begin(), targets.end(),
                        [this](uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                          return unfinished_.count(id) != 0;
                        });
  };
  SignalGroups(targets, SIGTERM);
  if (mu_.AwaitWithDeadline(absl::Condition(&all_finished), absl::Now() + grace)) return;
  SignalGroups(targets, SIGKILL);
  mu_.Await(absl::Condition(&all_finished));
}

size_t LocalLauncher::running() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

void LocalLauncher::SignalGroups(const std::set<uint64_t>& ids, int sig) {
  for (const auto& [pid, id] : live_) {
    if (ids.count(id) != 0) kill(-pid, sig);
  }
}

void LocalLauncher::Wake() {
  const uint64_t one = 1;
  // Can only fail when the counter is saturated, and then the thread wakes anyway.
  [[maybe_unused]] ssize_t written = write(wake_fd_.get(), &one, sizeof one);
}

absl::Status LocalLauncher::Watch(int fd, uint64_t key) {
  epoll_event event = {};
  event.events = EPOLLIN;
  event.data.u64 = key;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
    return ErrnoStatus(absl::StrCat("cannot watch descriptor ", fd));
  }
  return absl::OkStatus();
}

void LocalLauncher::Loop() {
  epoll_event events[kMaxEvents];
  while (true) {
    int ready = epoll_wait(epoll_fd_.get(), events, kMaxEvents, MillisUntilNextLingerDeadline());
    if (ready < 0) ready = 0;  // EINTR: our descriptors are valid, nothing else can fail
    bool woken = false;
    for (int i = 0; i < ready; ++i) {
      const uint64_t key = events[i].data.u64;
      const uint64_t id = key >> 2;
      switch (static_cast<Tag>(key & 3)) {
        case kStdoutTag:
          HandleOutput(id, OutputStream::kStdout);
          break;
        case kStderrTag:
          HandleOutput(id, OutputStream::kStderr);
          break;
        case kExitTag:
          HandleExit(id);
          break;
        case kWakeTag:
          woken = true;
          break;
      }
    }
    ExpireLingering();
    if (!woken) continue;
    uint64_t count;
    [[maybe_unused]] ssize_t got = read(wake_fd_.get(), &count, sizeof count);
    RunLaunchRequests();
    absl::MutexLock lock(&mu_);
    if (quit_) return;
  }
}

void LocalLauncher::RunLaunchRequests() {
  std::deque<LaunchRequest*> requests;
  {
    absl::MutexLock lock(&mu_);
    requests.swap(requests_);
  }
  for (LaunchRequest* request : requests) {
    request->result.set_value(StartChild(*request->plan, std::move(request->callbacks)));
  }
}

absl::StatusOr<pid_t> LocalLauncher::StartChild(const ExecPlan& plan, ProcessCallbacks callbacks) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the launcher is shutting down: not starting '", plan.argv[0], "'"));
    }
  }
  HVDD_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  HVDD_ASSIGN_OR_RETURN(Pipe err, MakePipe());
  ChildStdio stdio;
  stdio.stdin_fd = dev_null_.get();
  stdio.stdout_fd = out.write.get();
  stdio.stderr_fd = err.write.get();
  absl::StatusOr<pid_t> pid = SpawnProcess(plan, stdio);
  if (!pid.ok()) return pid.status();
  // Only the child may hold the write ends, so EOF means it (and its group) closed them.
  out.write.Reset();
  err.write.Reset();

  auto child = std::make_unique<Child>();
  child->pid = *pid;
  child->stdout_fd = std::move(out.read);
  child->stderr_fd = std::move(err.read);
  child->callbacks = std::move(callbacks);
  child->pidfd.Reset(static_cast<int>(syscall(SYS_pidfd_open, *pid, 0)));
  const uint64_t id = next_id_++;
  absl::Status watched = child->pidfd.valid()
                             ? absl::OkStatus()
                             : ErrnoStatus(absl::StrCat("cannot open a pidfd for pid ", *pid));
  if (watched.ok()) watched = Watch(child->stdout_fd.get(), Key(id, kStdoutTag));
  if (watched.ok()) watched = Watch(child->stderr_fd.get(), Key(id, kStderrTag));
  if (watched.ok()) watched = Watch(child->pidfd.get(), Key(id, kExitTag));
  if (!watched.ok()) {
    for (const UniqueFd* fd : {&child->stdout_fd, &child->stderr_fd, &child->pidfd}) {
      if (fd->valid()) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd->get(), nullptr);
    }
    KillAndReap(*pid);
    return watched;
  }
  children_.emplace(id, std::move(child));
  absl::MutexLock lock(&mu_);
  live_.emplace(*pid, id);
  unfinished_.insert(id);
  // The destructor's kill sweep may have run while this one was forking.
  if (stopping_) kill(-*pid, SIGKILL);
  return *pid;
}

void LocalLauncher::HandleOutput(uint64_t id, OutputStream stream) {
  auto it = children_.find(id);
  if (it == children_.end()) return;  // finished earlier in this batch of events
  Child& child = *it->second;
  if (!child.fd(stream).valid()) return;
  if (ReadOnce(child, stream) == ReadResult::kClosed) FinishIfDrained(id);
}

LocalLauncher::ReadResult LocalLauncher::ReadOnce(Child& child, OutputStream stream) {
  ssize_t got;
  do {
    got = read(child.fd(stream).get(), read_buffer_.data(), read_buffer_.size());
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    child.lines(stream).Feed(std::string_view(read_buffer_.data(), got), child.Emitter(stream));
    return ReadResult::kData;
  }
  if (got < 0 && errno == EAGAIN) return ReadResult::kNothingNow;
  CloseStream(child, stream);  // EOF, or an error that ends the stream just the same
  return ReadResult::kClosed;
}

void LocalLauncher::DrainNow(Child& child) {
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    for (int i = 0; i < kMaxDrainReads && child.fd(stream).valid(); ++i) {
      if (ReadOnce(child, stream) != ReadResult::kData) break;
    }
  }
}

void LocalLauncher::CloseStream(Child& child, OutputStream stream) {
  UniqueFd& fd = child.fd(stream);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
  fd.Reset();
  child.lines(stream).Flush(child.Emitter(stream));
}

void LocalLauncher::HandleExit(uint64_t id) {
  auto it = children_.find(id);
  if (it == children_.end()) return;
  Child& child = *it->second;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, child.pidfd.get(), nullptr);
  child.pidfd.Reset();
  child.exit = Reap(child.pid);
  // Everything the process wrote is in its pipes now; usually EOF follows.
  DrainNow(child);
  if (!child.stdout_fd.valid() && !child.stderr_fd.valid()) {
    Finish(id);
    return;
  }
  lingering_.emplace(id, absl::Now() + options_.output_linger);
}

void LocalLauncher::FinishIfDrained(uint64_t id) {
  auto it = children_.find(id);
  if (it == children_.end()) return;
  const Child& child = *it->second;
  if (child.exit.has_value() && !child.stdout_fd.valid() && !child.stderr_fd.valid()) Finish(id);
}

void LocalLauncher::Finish(uint64_t id) {
  std::unique_ptr<Child> child = std::move(children_.extract(id).mapped());
  lingering_.erase(id);
  if (child->callbacks.on_exit) child->callbacks.on_exit(*child->exit);
  absl::MutexLock lock(&mu_);
  unfinished_.erase(id);
}

void LocalLauncher::ExpireLingering() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> expired;
  for (const auto& [id, deadline] : lingering_) {
    if (deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    auto it = children_.find(id);
    if (it == children_.end()) continue;
    Child& child = *it->second;
    DrainNow(child);
    for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
      if (child.fd(stream).valid()) CloseStream(child, stream);
    }
    Finish(id);
  }
}

int LocalLauncher::MillisUntilNextLingerDeadline() const {
  if (lingering_.empty()) return -1;
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, deadline] : lingering_) next = std::min(next, deadline);
  const int64_t millis =
      absl::ToInt64Milliseconds(absl::Ceil(next - absl::Now(), absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(millis, 0, 60'000));
}

ExitInfo LocalLauncher::Reap(pid_t pid) {
  siginfo_t info = {};
  absl::MutexLock lock(&mu_);
  // No orphans: what is left of its group dies with it. The leader is a zombie
  // until reaped below, so the group id cannot have been reused.
  kill(-pid, SIGKILL);
  int reaped;
  do {
    reaped = waitid(P_PID, pid, &info, WEXITED);
  } while (reaped < 0 && errno == EINTR);
  live_.erase(pid);
  ExitInfo exit;
  if (reaped != 0) {
    exit.exit_code = -1;  // someone else reaped it; see the header
  } else if (info.si_code == CLD_EXITED) {
    exit.exit_code = info.si_status;
  } else {
    exit.signal = info.si_status;
    exit.core_dumped = info.si_code == CLD_DUMPED;
  }
  return exit;
}

}  // namespace horovodd::daemon
