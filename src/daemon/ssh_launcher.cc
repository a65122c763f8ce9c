#include "daemon/ssh_launcher.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/line_splitter.h"
#include "daemon/remote_command.h"
#include "daemon/ssh_session.h"

namespace horovodd::daemon {
namespace {

constexpr int kMaxPollMillis = 1000;
// How much of the remote shell's stderr a failed start quotes.
constexpr size_t kMaxQuotedError = 600;

int StreamIndex(OutputStream stream) { return stream == OutputStream::kStdout ? 0 : 1; }

// The tail of what the remote shell wrote to stderr, on one line.
std::string QuotedError(absl::string_view text) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    lines.push_back(absl::StripAsciiWhitespace(line));
  }
  std::string joined = absl::StrJoin(lines, " / ");
  if (joined.size() > kMaxQuotedError) joined = "..." + joined.substr(joined.size() - kMaxQuotedError);
  return joined;
}

}  // namespace

// One exec channel (`kill ...`) opened and run without blocking on a session
// the I/O thread drives.
class SshLauncher::KillChannel {
 public:
  KillChannel(ssh_session session, std::string command)
      : channel_(ssh_channel_new(session)), command_(std::move(command)) {}
  ~KillChannel() {
    if (channel_ != nullptr) ssh_channel_free(channel_);
  }
  KillChannel(const KillChannel&) = delete;
  KillChannel& operator=(const KillChannel&) = delete;

  // One step further; false once there is nothing left to do (ran or failed).
  bool Advance() {
    if (channel_ == nullptr) return false;
    int rc;
    switch (state_) {
      case State::kOpening:
        rc = ssh_channel_open_session(channel_);
        if (rc == SSH_AGAIN) return true;
        if (rc != SSH_OK) return false;
        state_ = State::kRequesting;
        [[fallthrough]];
      case State::kRequesting:
        rc = ssh_channel_request_exec(channel_, command_.c_str());
        if (rc == SSH_AGAIN) return true;
        if (rc != SSH_OK) return false;
        state_ = State::kRunning;
        [[fallthrough]];
      case State::kRunning:
        return !ssh_channel_is_closed(channel_) && !ssh_channel_is_eof(channel_);
    }
    return false;
  }

 private:
  enum class State { kOpening, kRequesting, kRunning };
  const ssh_channel channel_;
  const std::string command_;
  State state_ = State::kOpening;
};

// A remote process. Until Launch hands it to the I/O thread the calling
// thread owns it; from then on the I/O thread alone. The libssh callbacks run
// on whichever of the two drives the session.
struct SshLauncher::Process {
  int64_t handle = 0;
  int pid = 0;  // on its host; also its process group id
  std::unique_ptr<SshSession> session;
  ssh_channel channel = nullptr;
  ssh_channel_callbacks_struct channel_callbacks = {};  // lives as long as `channel`
  ProcessCallbacks callbacks;

  // Output before `delivering` is held back raw (Launch has not returned, and
  // callbacks run on the I/O thread only); after it, it goes out as lines.
  bool delivering = false;
  std::string held[2];  // stdout, stderr
  LineSplitter lines[2];
  std::optional<ExitInfo> exit;
  std::string note;     // a last stderr line from the launcher, if any
  bool closed = false;  // the host closed the channel: all output is in
  bool unwatched = false;  // the I/O thread could not watch its session

  // I/O thread only.
  std::vector<std::unique_ptr<KillChannel>> kills;
  absl::Time linger_until = absl::InfiniteFuture();  // set once exited
  absl::Time kill_deadline = absl::InfiniteFuture();  // set by a SIGKILL
  bool group_killed = false;  // the leftovers of its group were killed after it exited

  ~Process() {
    kills.clear();  // their channels belong to the session
    if (channel != nullptr) ssh_channel_free(channel);
    session.reset();
  }

  bool Connected() const {
    ssh_session s = session->get();
    return ssh_is_connected(s) && (ssh_get_status(s) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
  }

  void Deliver(OutputStream stream, std::string_view bytes) {
    lines[StreamIndex(stream)].Feed(bytes, Emitter(stream));
  }
  LineSplitter::Emit Emitter(OutputStream stream) {
    return [this, stream](std::string_view line) {
      if (callbacks.on_line) callbacks.on_line(stream, line);
    };
  }

  // Finds the marker line in the held stdout, takes the pid from it and drops
  // it; lines before it (a chatty login script) stay as output.
  bool TakePid() {
    std::string& out = held[0];
    size_t start = 0;
    for (size_t end; (end = out.find('\n', start)) != std::string::npos; start = end + 1) {
      if (std::optional<int> found = ParseRemotePidLine(
              std::string_view(out).substr(start, end - start))) {
        pid = *found;
        out.erase(start, end - start + 1);
        return true;
      }
    }
    return false;
  }

  void InstallCallbacks() {
    ssh_callbacks_init(&channel_callbacks);
    channel_callbacks.userdata = this;
    channel_callbacks.channel_data_function = [](ssh_session, ssh_channel, void* data,
                                                 uint32_t len, int is_stderr, void* self) {
      auto* p = static_cast<Process*>(self);
      std::string_view bytes(static_cast<const char*>(data), len);
      if (p->delivering) {
        p->Deliver(is_stderr ? OutputStream::kStderr : OutputStream::kStdout, bytes);
      } else {
        p->held[is_stderr ? 1 : 0].append(bytes);
      }
      return static_cast<int>(len);
    };
    channel_callbacks.channel_close_function = [](ssh_session, ssh_channel, void* self) {
      static_cast<Process*>(self)->closed = true;
    };
    channel_callbacks.channel_exit_status_function = [](ssh_session, ssh_channel, int status,
                                                        void* self) {
      ExitInfo exit;
      exit.exit_code = status;
      static_cast<Process*>(self)->exit = exit;
    };
    channel_callbacks.channel_exit_signal_function =
        [](ssh_session, ssh_channel, const char* name, int core, const char*, const char*,
           void* self) {
          auto* p = static_cast<Process*>(self);
          ExitInfo exit;
          exit.signal = SignalFromSshName(name != nullptr ? name : "");
          exit.core_dumped = exit.signal != 0 && core != 0;
          if (exit.signal == 0) {
            exit.exit_code = -1;
            p->note = absl::StrCat("killed by signal ", name != nullptr ? name : "(unnamed)",
                                   ", which this daemon does not know");
          }
          p->exit = exit;
        };
    ssh_set_channel_callbacks(channel, &channel_callbacks);
  }
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
    return absl::Status(command.status().code(), absl::StrCat("cannot run the command on ",
                                                              launch.host, ": ",
                                                              command.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the SSH launcher is shutting down: not starting '", launch.spec.argv[0], "' on ",
          launch.host));
    }
  }
  absl::StatusOr<std::unique_ptr<SshSession>> session =
      SshSession::Connect(launch.host, launch.ssh, options_.connect_timeout);
  if (!session.ok()) return session.status();
  auto process = std::make_unique<Process>();
  process->session = std::move(*session);
  process->callbacks = std::move(callbacks);
  if (absl::Status started = StartRemote(*process, *command); !started.ok()) return started;
  ssh_set_blocking(process->session->get(), 0);

  LaunchedProcess launched;
  launched.pid = process->pid;
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    launched.handle = process->handle = next_handle_++;
    unfinished_.insert(launched.handle);
    if (stopping_) {
      // Started while the launcher was being destroyed: it is killed, and as
      // Launch fails, no callback may run.
      refused = true;
      process->callbacks = {};
      QueueSignalLocked(launched.handle, SIGKILL);
    }
    adopt_.push_back(std::move(process));
  }
  Wake();
  if (refused) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the SSH launcher is shutting down: not starting '", launch.spec.argv[0], "' on ",
        launch.host));
  }
  return launched;
}

absl::Status SshLauncher::StartRemote(Process& process, const std::string& command) {
  ssh_session session = process.session->get();
  const std::string& host = process.session->name();
  process.channel = ssh_channel_new(session);
  if (process.channel == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot create an SSH channel to ", host, ": ",
                                               process.session->LastError()));
  }
  process.InstallCallbacks();
  if (ssh_channel_open_session(process.channel) != SSH_OK) {
    return absl::UnavailableError(absl::StrCat("cannot open an SSH channel to ", host, ": ",
                                               process.session->LastError()));
  }
  if (ssh_channel_request_exec(process.channel, command.c_str()) != SSH_OK) {
    return absl::UnavailableError(absl::StrCat(host, " refused to run the command: ",
                                               process.session->LastError()));
  }
  // Its stdin is empty, as /dev/null is for local workers.
  ssh_channel_send_eof(process.channel);

  // Drive the session here until the remote shell reports the pid.
  ssh_event event = ssh_event_new();
  if (event == nullptr || ssh_event_add_session(event, session) != SSH_OK) {
    if (event != nullptr) ssh_event_free(event);
    return absl::InternalError(absl::StrCat("cannot poll the SSH session to ", host));
  }
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  absl::Status status;
  while (!process.TakePid()) {
    if (process.closed) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "the command did not start on ", host, " (the remote shell ",
          process.exit ? process.exit->Describe() : "ended", ")",
          process.held[1].empty() ? "" : ": ", QuotedError(process.held[1])));
      break;
    }
    if (!process.Connected()) {
      status = absl::UnavailableError(absl::StrCat("the connection to ", host,
                                                   " broke while starting the command: ",
                                                   process.session->LastError()));
      break;
    }
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(absl::StrCat(
          host, " did not start the command within ",
          absl::FormatDuration(options_.start_timeout)));
      break;
    }
    ssh_event_dopoll(event, 100);
  }
  ssh_event_remove_session(event, session);
  ssh_event_free(event);
  return status;
}

absl::Status SshLauncher::Signal(int64_t handle, int sig) {
  absl::MutexLock lock(&mu_);
  if (unfinished_.count(handle) == 0) {
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
                        [this](int64_t handle) { return unfinished_.count(handle) != 0; });
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
    if (ssh_event_add_session(event_, process->session->get()) != SSH_OK) {
      process->unwatched = true;
      process->note = absl::StrCat("cannot watch the SSH session to ", process->session->name());
    }
    process->delivering = true;
    for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
      std::string held = std::move(process->held[StreamIndex(stream)]);
      process->Deliver(stream, held);
    }
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
  if (sig == SIGKILL) process.kill_deadline = std::min(process.kill_deadline, now + options_.kill_timeout);
  auto kill = std::make_unique<KillChannel>(process.session->get(),
                                            RemoteKillCommand(process.pid, sig));
  if (kill->Advance()) process.kills.push_back(std::move(kill));
}

bool SshLauncher::Advance(Process& process, absl::Time now) {
  process.kills.erase(std::remove_if(process.kills.begin(), process.kills.end(),
                                     [](const auto& kill) { return !kill->Advance(); }),
                      process.kills.end());
  if (process.unwatched) return false;
  if (process.closed) return false;
  if (!process.Connected()) {
    if (!process.exit) {
      process.note = absl::StrCat("lost the SSH connection to ", process.session->name(), ": ",
                                  process.session->LastError());
    }
    return false;
  }
  if (process.exit && process.linger_until == absl::InfiniteFuture()) {
    process.linger_until = now + options_.output_linger;
  }
  if (!process.group_killed && now >= process.linger_until) {
    // It exited, yet something it started still holds its output open.
    process.group_killed = true;
    SendSignal(process, SIGKILL, now);
  }
  if (now >= process.kill_deadline) {
    if (!process.exit) {
      process.note = absl::StrCat(
          "no answer from ", process.session->name(), " within ",
          absl::FormatDuration(options_.kill_timeout),
          " of SIGKILL: giving up on the process (the host may be down or cut off)");
    }
    return false;
  }
  return true;
}

void SshLauncher::Finish(int64_t handle) {
  std::unique_ptr<Process> process = std::move(processes_.extract(handle).mapped());
  ssh_event_remove_session(event_, process->session->get());
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    process->lines[StreamIndex(stream)].Flush(process->Emitter(stream));
  }
  ExitInfo exit;
  if (process->exit) {
    exit = *process->exit;
  } else {
    exit.exit_code = -1;
    if (process->note.empty()) {
      process->note = absl::StrCat(process->session->name(), " reported no exit status");
    }
  }
  if (!process->note.empty() && process->callbacks.on_line) {
    process->callbacks.on_line(OutputStream::kStderr, absl::StrCat("horovodd: ", process->note));
  }
  ProcessCallbacks callbacks = std::move(process->callbacks);
  process.reset();  // closes the channel and the session
  if (callbacks.on_exit) callbacks.on_exit(exit);
  absl::MutexLock lock(&mu_);
  unfinished_.erase(handle);
}

int SshLauncher::MillisUntilNextDeadline(absl::Time now) const {
  absl::Time next = now + absl::Milliseconds(kMaxPollMillis);
  for (const auto& [handle, process] : processes_) {
    if (!process->group_killed) next = std::min(next, process->linger_until);
    next = std::min(next, process->kill_deadline);
  }
  const int64_t millis = absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(millis, 0, kMaxPollMillis));
}

}  // namespace horovodd::daemon
