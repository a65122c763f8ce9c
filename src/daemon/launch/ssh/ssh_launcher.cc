#include "daemon/launch/ssh/ssh_launcher.h"

#include <libssh/libssh.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "daemon/launch/ssh/daemon_tunnel.h"
#include "daemon/launch/ssh/remote_command.h"
#include "daemon/launch/ssh/remote_process.h"
#include "daemon/launch/ssh/ssh_session.h"

namespace horovodd::daemon {
namespace {

constexpr int kMaxPollMillis = 1000;
// While bytes wait in a tunnel (a socket or an SSH window was full).
constexpr int kBackloggedPollMillis = 5;

}  // namespace

// A remote process and the launcher's deadlines for it.
struct SshLauncher::Process {
  int64_t handle = 0;
  std::unique_ptr<RemoteProcess> remote;
  // Owned by the I/O thread once adopted.
  bool unwatched = false;                             // its session could not be polled
  absl::Time linger_until = absl::InfiniteFuture();   // set once it exited
  absl::Time kill_deadline = absl::InfiniteFuture();  // set by a SIGKILL
  bool group_killed = false;  // what was left of its group was killed after it exited
  std::string note;           // why it ends without an exit status, if it does
};

absl::StatusOr<std::unique_ptr<SshLauncher>> SshLauncher::Create(
    const SshLauncherOptions& options) {
  if (ssh_init() != SSH_OK) return absl::InternalError("cannot initialise libssh");
  UniqueFd wake_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ssh_event event = wake_fd.valid() ? ssh_event_new() : nullptr;
  if (event == nullptr) {
    ssh_finalize();
    return absl::InternalError("cannot create the SSH launcher's event loop");
  }
  const int fd = wake_fd.get();
  std::unique_ptr<SshLauncher> launcher(new SshLauncher(options, std::move(wake_fd), event));
  const auto drain = [](socket_t fd, int, void*) {
    uint64_t count;
    [[maybe_unused]] ssize_t got = read(fd, &count, sizeof count);
    return 0;
  };
  if (ssh_event_add_fd(event, fd, POLLIN, drain, nullptr) != SSH_OK) {
    return absl::InternalError("cannot watch the SSH launcher's wake-up descriptor");
  }
  // Signals for the daemon must not land on the I/O thread.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  launcher->io_thread_ = std::thread(&SshLauncher::Loop, launcher.get());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return launcher;
}

SshLauncher::SshLauncher(const SshLauncherOptions& options, UniqueFd wake_fd,
                         ssh_event_struct* event)
    : options_(options), wake_fd_(std::move(wake_fd)), event_(event) {}

SshLauncher::~SshLauncher() {
  if (io_thread_.joinable()) {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (int64_t handle : unfinished_) QueueSignalLocked(handle, SIGKILL);
    // Bounded: a SIGKILL that is not confirmed within kill_timeout ends the wait.
    mu_.Await(absl::Condition(
        +[](std::set<int64_t>* handles) { return handles->empty(); }, &unfinished_));
    quit_ = true;
  }
  Wake();
  if (io_thread_.joinable()) io_thread_.join();
  ssh_event_remove_fd(event_, wake_fd_.get());
  ssh_event_free(event_);
  ssh_finalize();
}

absl::StatusOr<LaunchedProcess> SshLauncher::Launch(const WorkerLaunch& launch,
                                                    ProcessCallbacks callbacks) {
  absl::StatusOr<std::string> command = RemoteLaunchCommand(launch.spec);
  if (!command.ok()) {
    return absl::Status(
        command.status().code(),
        absl::StrCat("cannot run the command on ", launch.host, ": ", command.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the SSH launcher is shutting down: not starting '", launch.spec.argv[0],
                       "' on ", launch.host));
    }
  }
  absl::StatusOr<std::unique_ptr<SshSession>> session =
      SshSession::Connect(launch.host, SshOptionsIn(launch.route), options_.connect_timeout);
  if (!session.ok()) return session.status();
  // A daemon on loopback is out of the host's reach: the worker gets a port
  // on its own host that leads back through this session.
  LaunchSpec spec = launch.spec;
  std::unique_ptr<DaemonTunnel> tunnel;
  if (auto daemon = spec.env.find(kDaemonAddressVariable); daemon != spec.env.end()) {
    if (std::optional<LoopbackAddress> loopback = ParseLoopbackAddress(daemon->second)) {
      absl::StatusOr<std::unique_ptr<DaemonTunnel>> opened =
          DaemonTunnel::Open((*session)->get(), (*session)->name(), *std::move(loopback));
      if (!opened.ok()) return opened.status();
      tunnel = *std::move(opened);
      daemon->second = tunnel->address_on_host();
      command = RemoteLaunchCommand(spec);
      if (!command.ok()) return command.status();
    }
  }
  auto process = std::make_unique<Process>();
  process->remote =
      std::make_unique<RemoteProcess>(std::move(*session), std::move(callbacks), std::move(tunnel));
  if (absl::Status started =
          process->remote->Start(*command, RemoteLaunchStdin(spec), options_.start_timeout);
      !started.ok()) {
    return started;
  }
  ssh_set_blocking(process->remote->session(), 0);

  LaunchedProcess launched;
  launched.pid = process->remote->pid();
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    launched.handle = process->handle = next_handle_++;
    unfinished_.insert(launched.handle);
    signalable_.insert(launched.handle);
    if (stopping_) {
      // Started while the launcher was being destroyed: it is killed, and as
      // Launch fails, no callback may run.
      refused = true;
      process->remote->ForgetCallbacks();
      QueueSignalLocked(launched.handle, SIGKILL);
    }
    adopt_.push_back(std::move(process));
  }
  Wake();
  if (refused) {
    return absl::FailedPreconditionError(
        absl::StrCat("the SSH launcher is shutting down: not starting '", launch.spec.argv[0],
                     "' on ", launch.host));
  }
  return launched;
}

absl::Status SshLauncher::Signal(int64_t handle, int sig) {
  absl::MutexLock lock(&mu_);
  if (signalable_.count(handle) == 0) {
    return absl::NotFoundError(absl::StrCat("no running remote process has handle ", handle));
  }
  QueueSignalLocked(handle, sig);
  return absl::OkStatus();
}

void SshLauncher::QueueSignalLocked(int64_t handle, int sig) {
  signals_.emplace_back(handle, sig);
  Wake();
}

void SshLauncher::TerminateAll(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  const std::set<int64_t> targets = unfinished_;
  for (int64_t handle : targets) QueueSignalLocked(handle, SIGTERM);
  if (AwaitFinished(targets, absl::Now() + grace)) return;
  for (int64_t handle : targets) {
    if (unfinished_.count(handle) != 0) QueueSignalLocked(handle, SIGKILL);
  }
  AwaitFinished(targets, absl::InfiniteFuture());
}

bool SshLauncher::AwaitFinished(const std::set<int64_t>& handles, absl::Time deadline) {
  const auto all_finished = [this, &handles]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::none_of(handles.begin(), handles.end(),
                        [this](int64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                          return unfinished_.count(handle) != 0;
                        });
  };
  return mu_.AwaitWithDeadline(absl::Condition(&all_finished), deadline);
}

size_t SshLauncher::running() const {
  absl::MutexLock lock(&mu_);
  return unfinished_.size();
}

void SshLauncher::Wake() {
  const uint64_t one = 1;
  // Can only fail when the counter is saturated, and then the thread wakes anyway.
  [[maybe_unused]] ssize_t written = write(wake_fd_.get(), &one, sizeof one);
}

void SshLauncher::Loop() {
  while (true) {
    int timeout = MillisUntilNextDeadline(absl::Now());
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      // A nested poll inside libssh may have drained the wake-up descriptor.
      if (!adopt_.empty() || !signals_.empty()) timeout = 0;
    }
    ssh_event_dopoll(event_, timeout);
    AdoptNewProcesses();
    DeliverSignals();
    const absl::Time now = absl::Now();
    std::vector<int64_t> over;
    for (auto& [handle, process] : processes_) {
      if (!Advance(*process, now)) over.push_back(handle);
    }
    for (int64_t handle : over) Finish(handle);
  }
}

void SshLauncher::AdoptNewProcesses() {
  std::deque<std::unique_ptr<Process>> adopted;
  {
    absl::MutexLock lock(&mu_);
    adopted.swap(adopt_);
  }
  for (std::unique_ptr<Process>& process : adopted) {
    if (ssh_event_add_session(event_, process->remote->session()) != SSH_OK) {
      process->unwatched = true;
      process->note = absl::StrCat("cannot watch the SSH session to ", process->remote->host());
    }
    process->remote->WatchTunnel(event_);
    process->remote->StartDelivering();
    const int64_t handle = process->handle;
    processes_.emplace(handle, std::move(process));
  }
}

void SshLauncher::DeliverSignals() {
  std::deque<std::pair<int64_t, int>> signals;
  {
    absl::MutexLock lock(&mu_);
    signals.swap(signals_);
  }
  const absl::Time now = absl::Now();
  for (const auto& [handle, sig] : signals) {
    auto it = processes_.find(handle);
    if (it != processes_.end()) SendSignal(*it->second, sig, now);
  }
}

void SshLauncher::SendSignal(Process& process, int sig, absl::Time now) {
  if (sig == SIGKILL) {
    process.kill_deadline = std::min(process.kill_deadline, now + options_.kill_timeout);
  }
  process.remote->Signal(sig);
}

bool SshLauncher::Advance(Process& process, absl::Time now) {
  RemoteProcess& remote = *process.remote;
  remote.AdvanceChannels();
  if (process.unwatched || remote.closed()) return false;
  if (!remote.connected()) {
    process.note =
        absl::StrCat("lost the SSH connection to ", remote.host(), ": ", remote.LastError());
    return false;
  }
  if (remote.exit() && process.linger_until == absl::InfiniteFuture()) {
    process.linger_until = now + options_.output_linger;
  }
  if (!process.group_killed && now >= process.linger_until) {
    // It exited, yet something it started still holds its output open.
    process.group_killed = true;
    SendSignal(process, SIGKILL, now);
  }
  if (now >= process.kill_deadline) {
    process.note = absl::StrCat(
        "no answer from ", remote.host(), " within ", absl::FormatDuration(options_.kill_timeout),
        " of SIGKILL: giving up on the process (the host may be down or cut off)");
    return false;
  }
  return true;
}

void SshLauncher::Finish(int64_t handle) {
  std::unique_ptr<Process> process = std::move(processes_.extract(handle).mapped());
  RemoteProcess& remote = *process->remote;
  ssh_event_remove_session(event_, remote.session());
  ExitInfo exit;
  std::string note;
  if (remote.exit()) {
    exit = *remote.exit();
    note = remote.exit_note();
  } else {
    exit.exit_code = -1;
    note = process->note.empty() ? absl::StrCat(remote.host(), " reported no exit status")
                                 : process->note;
  }
  ProcessCallbacks callbacks = remote.Finish(note);
  process.reset();  // closes the channels and the session
  {
    absl::MutexLock lock(&mu_);
    signalable_.erase(handle);
  }
  if (callbacks.on_exit) callbacks.on_exit(exit);
  absl::MutexLock lock(&mu_);
  unfinished_.erase(handle);
}

int SshLauncher::MillisUntilNextDeadline(absl::Time now) const {
  absl::Time next = now + absl::Milliseconds(kMaxPollMillis);
  for (const auto& [handle, process] : processes_) {
    if (!process->group_killed) next = std::min(next, process->linger_until);
    next = std::min(next, process->kill_deadline);
    if (process->remote->TunnelBacklogged()) {
      next = std::min(next, now + absl::Milliseconds(kBackloggedPollMillis));
    }
  }
  const int64_t millis = absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(millis, 0, kMaxPollMillis));
}

}  // namespace horovodd::daemon
