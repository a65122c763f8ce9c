#include "daemon/launch/ssh/remote_process.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/launch/ssh/remote_command.h"

namespace horovodd::daemon {
namespace {

// How much of the remote shell's stderr a failed start quotes.
constexpr size_t kMaxQuotedError = 600;
constexpr int kStartPollMillis = 100;

int StreamIndex(OutputStream stream) { return stream == OutputStream::kStdout ? 0 : 1; }

// The tail of what the remote shell wrote to stderr, on one line.
std::string QuotedError(absl::string_view text) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    lines.push_back(absl::StripAsciiWhitespace(line));
  }
  std::string joined = absl::StrJoin(lines, " / ");
  if (joined.size() > kMaxQuotedError) {
    joined = "..." + joined.substr(joined.size() - kMaxQuotedError);
  }
  return joined;
}

}  // namespace

// One `kill` exec channel, opened and run without blocking.
class RemoteProcess::KillChannel {
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

RemoteProcess::RemoteProcess(std::unique_ptr<SshSession> session, ProcessCallbacks callbacks,
                             std::unique_ptr<DaemonTunnel> tunnel)
    : session_(std::move(session)), callbacks_(std::move(callbacks)), tunnel_(std::move(tunnel)) {}

RemoteProcess::~RemoteProcess() {
  kills_.clear();
  if (channel_ != nullptr) {
    // libssh keeps a channel freed before the host closed it, and would run
    // its callbacks (which point here) on a close that arrives later.
    ssh_remove_channel_callbacks(channel_, &channel_callbacks_);
    ssh_channel_free(channel_);
  }
  // session_ goes last: it disconnects.
}

absl::Status RemoteProcess::Start(const std::string& command, const std::string& input,
                                  absl::Duration timeout) {
  channel_ = ssh_channel_new(session());
  if (channel_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create an SSH channel to ", host(), ": ", LastError()));
  }
  InstallCallbacks();
  if (ssh_channel_open_session(channel_) != SSH_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot open an SSH channel to ", host(), ": ", LastError()));
  }
  if (ssh_channel_request_exec(channel_, command.c_str()) != SSH_OK) {
    return absl::UnavailableError(
        absl::StrCat(host(), " refused to run the command: ", LastError()));
  }
  // Secrets, if any (RemoteLaunchStdin); then end-of-file, as /dev/null is
  // for local workers. The session is still blocking here: all of it is sent.
  if (!input.empty() &&
      ssh_channel_write(channel_, input.data(), static_cast<uint32_t>(input.size())) !=
          static_cast<int>(input.size())) {
    return absl::UnavailableError(
        absl::StrCat("cannot send the worker's credentials to ", host(), ": ", LastError()));
  }
  ssh_channel_send_eof(channel_);

  // Drive the session here until the remote shell reports the pid.
  ssh_event event = ssh_event_new();
  if (event == nullptr || ssh_event_add_session(event, session()) != SSH_OK) {
    if (event != nullptr) ssh_event_free(event);
    return absl::InternalError(absl::StrCat("cannot poll the SSH session to ", host()));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status status;
  while (!TakePid()) {
    if (closed_) {
      const std::string& errors = held_[StreamIndex(OutputStream::kStderr)];
      status = absl::FailedPreconditionError(
          absl::StrCat("the command did not start on ", host(), " (the remote shell ",
                       exit_ ? exit_->Describe() : "ended", ")", errors.empty() ? "" : ": ",
                       QuotedError(errors)));
      break;
    }
    if (!connected()) {
      status = absl::UnavailableError(absl::StrCat(
          "the connection to ", host(), " broke while starting the command: ", LastError()));
      break;
    }
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(absl::StrCat(
          host(), " did not start the command within ", absl::FormatDuration(timeout)));
      break;
    }
    ssh_event_dopoll(event, kStartPollMillis);
  }
  ssh_event_remove_session(event, session());
  ssh_event_free(event);
  return status;
}

void RemoteProcess::StartDelivering() {
  delivering_ = true;
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    const std::string held = std::move(held_[StreamIndex(stream)]);
    held_[StreamIndex(stream)].clear();
    Deliver(held, stream);
  }
}

void RemoteProcess::Signal(int sig) {
  auto kill = std::make_unique<KillChannel>(session(), RemoteKillCommand(pid_, sig));
  if (kill->Advance()) kills_.push_back(std::move(kill));
}

void RemoteProcess::AdvanceChannels() {
  std::vector<std::unique_ptr<KillChannel>> pending;
  for (auto& kill : kills_) {
    if (kill->Advance()) pending.push_back(std::move(kill));
  }
  kills_ = std::move(pending);
  if (tunnel_ != nullptr) tunnel_->Pump();
}

void RemoteProcess::WatchTunnel(ssh_event event) {
  if (tunnel_ != nullptr) tunnel_->Watch(event);
}

ProcessCallbacks RemoteProcess::Finish(const std::string& note) {
  for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
    lines_[StreamIndex(stream)].Flush(Emitter(stream));
  }
  if (!note.empty() && callbacks_.on_line) {
    callbacks_.on_line(OutputStream::kStderr, absl::StrCat("horovodd: ", note));
  }
  return std::move(callbacks_);
}

bool RemoteProcess::connected() const {
  return ssh_is_connected(session()) &&
         (ssh_get_status(session()) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

void RemoteProcess::OnData(std::string_view bytes, OutputStream stream) {
  if (delivering_) {
    Deliver(bytes, stream);
  } else {
    held_[StreamIndex(stream)].append(bytes);
  }
}

void RemoteProcess::Deliver(std::string_view bytes, OutputStream stream) {
  lines_[StreamIndex(stream)].Feed(bytes, Emitter(stream));
}

LineSplitter::Emit RemoteProcess::Emitter(OutputStream stream) {
  return [this, stream](std::string_view line) {
    if (callbacks_.on_line) callbacks_.on_line(stream, line);
  };
}

bool RemoteProcess::TakePid() {
  // Lines before the marker (a chatty login script) stay as output.
  std::string& out = held_[StreamIndex(OutputStream::kStdout)];
  size_t start = 0;
  for (size_t end; (end = out.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::optional<int> pid =
        ParseRemotePidLine(std::string_view(out).substr(start, end - start));
    if (pid) {
      pid_ = *pid;
      out.erase(start, end - start + 1);
      return true;
    }
  }
  return false;
}

void RemoteProcess::InstallCallbacks() {
  ssh_callbacks_init(&channel_callbacks_);
  channel_callbacks_.userdata = this;
  channel_callbacks_.channel_data_function = [](ssh_session, ssh_channel, void* data, uint32_t len,
                                                int is_stderr, void* self) {
    static_cast<RemoteProcess*>(self)->OnData(
        std::string_view(static_cast<const char*>(data), len),
        is_stderr ? OutputStream::kStderr : OutputStream::kStdout);
    return static_cast<int>(len);  // all of it taken
  };
  channel_callbacks_.channel_close_function = [](ssh_session, ssh_channel, void* self) {
    static_cast<RemoteProcess*>(self)->closed_ = true;
  };
  channel_callbacks_.channel_exit_status_function = [](ssh_session, ssh_channel, int status,
                                                       void* self) {
    ExitInfo exit;
    exit.exit_code = status;
    static_cast<RemoteProcess*>(self)->exit_ = exit;
  };
  channel_callbacks_.channel_exit_signal_function = [](ssh_session, ssh_channel, const char* name,
                                                       int core, const char*, const char*,
                                                       void* self) {
    auto* process = static_cast<RemoteProcess*>(self);
    const std::string signal_name = name != nullptr ? name : "";
    ExitInfo exit;
    exit.signal = SignalFromSshName(signal_name);
    exit.core_dumped = exit.signal != 0 && core != 0;
    if (exit.signal == 0) {
      exit.exit_code = -1;
      process->exit_note_ =
          absl::StrCat("killed by signal '", signal_name, "', which horovodd does not know");
    }
    process->exit_ = exit;
  };
  ssh_set_channel_callbacks(channel_, &channel_callbacks_);
}

}  // namespace horovodd::daemon
