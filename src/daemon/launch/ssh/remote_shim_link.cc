#include "daemon/launch/ssh/remote_shim_link.h"

#include <libssh/libssh.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/launch/ssh/remote_command.h"

namespace horovodd::daemon {
namespace {

constexpr size_t kMaxBuffered = size_t{4} << 20;
constexpr size_t kChunk = 64 << 10;
constexpr int kMaxPollMillis = 1000;
constexpr int kBackloggedPollMillis = 5;

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` on the host of `session` (blocking) and waits for its end.
absl::StatusOr<CommandResult> RunCommand(const SshSession& session, const std::string& command,
                                         absl::Duration timeout) {
  ssh_channel channel = ssh_channel_new(session.get());
  if (channel == nullptr || ssh_channel_open_session(channel) != SSH_OK ||
      ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    std::string why = session.LastError();
    if (channel != nullptr) ssh_channel_free(channel);
    return absl::UnavailableError(
        absl::StrCat("cannot run a command on ", session.name(), ": ", why));
  }
  CommandResult result;
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[4096];
  while (!ssh_channel_is_eof(channel) && absl::Now() < deadline) {
    for (int is_stderr : {0, 1}) {
      const int n = ssh_channel_read_timeout(channel, buffer, sizeof buffer, is_stderr, 100);
      if (n == SSH_ERROR) break;
      if (n > 0) (is_stderr ? result.err : result.out).append(buffer, static_cast<size_t>(n));
    }
    if (!ssh_is_connected(session.get())) break;
  }
  const bool finished = ssh_channel_is_eof(channel);
  if (finished) result.exit_code = ssh_channel_get_exit_status(channel);
  ssh_channel_close(channel);
  ssh_channel_free(channel);
  if (!finished) {
    return absl::DeadlineExceededError(absl::StrCat(
        session.name(), " did not finish a command within ", absl::FormatDuration(timeout)));
  }
  return result;
}

// "<job>.<host>": the host is in the name because hosts may share a home
// directory (NFS), and with it the shims' dir. Bytes a file name should not
// hold become '_'.
std::string ShimFileStem(const RemoteShimPlace& place) {
  std::string host = place.host;
  for (char& c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      c = '_';
    }
  }
  return absl::StrCat(place.job_id, ".", host);
}

// The shims' dir on the host, made if missing (only its user can enter it).
absl::StatusOr<std::string> ShimDirOnHost(const SshSession& session, const RemoteShimPlace& place) {
  const std::string dir = absl::StrCat("$HOME/.horovodd/", place.shim_namespace, "/shims");
  // The namespace is [0-9a-f]+ (it is quoted all the same, but for $HOME).
  HVDD_ASSIGN_OR_RETURN(
      CommandResult made,
      RunCommand(session, absl::StrCat("umask 077 && mkdir -p \"", dir, "\" && cd \"", dir,
                                       "\" && pwd"),
                 place.timeout));
  const std::string path(absl::StripAsciiWhitespace(made.out));
  if (made.exit_code != 0 || path.empty() || path[0] != '/') {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make the shim dir ~/.horovodd/", place.shim_namespace, "/shims on ",
                     session.name(), ": ", absl::StripAsciiWhitespace(made.err)));
  }
  return path;
}

absl::Status StartShim(const SshSession& session, const RemoteShimPlace& place,
                       const std::string& dir) {
  const std::string socket = absl::StrCat(dir, "/", ShimFileStem(place), ".sock");
  const std::string log = absl::StrCat(dir, "/", ShimFileStem(place), ".log");
  std::vector<std::string> words = {ShellQuote(place.shim_binary),
                                    "--job",
                                    ShellQuote(place.job_id),
                                    "--socket",
                                    ShellQuote(socket),
                                    "--log",
                                    ShellQuote(log)};
  for (const std::string& flag : place.shim_flags) words.push_back(ShellQuote(flag));
  // The shim listens, forks and setsids; the process started here exits 0
  // once the socket is ready. Its stdio is no channel's, so the session's end
  // does not wait for it, and nothing of the session reaches it.
  const std::string command =
      absl::StrCat(absl::StrJoin(words, " "), " </dev/null >/dev/null 2>&1 || { tail -n 1 ",
                   ShellQuote(log), " >&2; exit 1; }");
  HVDD_ASSIGN_OR_RETURN(CommandResult started, RunCommand(session, command, place.timeout));
  if (started.exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("horovodd-shim for job ", place.job_id, " did not start on ", session.name(),
                     ": ", absl::StripAsciiWhitespace(started.err), " (", place.shim_binary, ")"));
  }
  return absl::OkStatus();
}

// A channel to the unix socket `path` on the host; nullptr when nothing
// listens there (or the host's sshd refuses streamlocal forwarding).
ssh_channel OpenSocketChannel(const SshSession& session, const std::string& path) {
  ssh_channel channel = ssh_channel_new(session.get());
  if (channel == nullptr) return nullptr;
  if (ssh_channel_open_forward_unix(channel, path.c_str(), "127.0.0.1", 0) != SSH_OK) {
    ssh_channel_free(channel);
    return nullptr;
  }
  return channel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteShimLink>> RemoteShimLink::Open(const RemoteShimPlace& place,
                                                                     bool start) {
  HVDD_ASSIGN_OR_RETURN(std::unique_ptr<SshSession> session,
                        SshSession::Connect(place.host, place.ssh, place.timeout));
  HVDD_ASSIGN_OR_RETURN(std::string dir, ShimDirOnHost(*session, place));
  const std::string socket = absl::StrCat(dir, "/", ShimFileStem(place), ".sock");
  ssh_channel channel = OpenSocketChannel(*session, socket);
  if (channel == nullptr && start) {
    HVDD_RETURN_IF_ERROR(StartShim(*session, place, dir));
    channel = OpenSocketChannel(*session, socket);
  }
  if (channel == nullptr) {
    return absl::NotFoundError(absl::StrCat("no shim of job ", place.job_id, " answers at ", socket,
                                            " on ", session->name(), ": ", session->LastError()));
  }
  int ends[2];
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid() || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    ssh_channel_free(channel);
    return absl::InternalError("cannot make the shim link's sockets");
  }
  ssh_set_blocking(session->get(), 0);
  std::unique_ptr<RemoteShimLink> link(new RemoteShimLink(
      std::move(session), channel, UniqueFd(ends[0]), UniqueFd(ends[1]), std::move(wake)));
  // Signals for the daemon must not land on the link's thread.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  link->thread_ = std::thread(&RemoteShimLink::Run, link.get());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return link;
}

RemoteShimLink::RemoteShimLink(std::unique_ptr<SshSession> session, ssh_channel channel,
                               UniqueFd daemon_end, UniqueFd link_end, UniqueFd wake)
    : host_(session->name()),
      session_(std::move(session)),
      channel_(channel),
      daemon_end_(std::move(daemon_end)),
      link_end_(std::move(link_end)),
      wake_(std::move(wake)) {}

RemoteShimLink::~RemoteShimLink() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  tunnel_.reset();            // before the session
  if (channel_ != nullptr) {  // the thread frees it as it ends
    ssh_channel_close(channel_);
    ssh_channel_free(channel_);
  }
}

void RemoteShimLink::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = write(wake_.get(), &one, sizeof one);
}

absl::StatusOr<std::string> RemoteShimLink::OpenTunnel(const LoopbackAddress& daemon,
                                                       int port_on_host) {
  absl::Mutex done_mu;
  bool done = false;
  absl::StatusOr<std::string> result =
      absl::AbortedError(absl::StrCat("the SSH connection to ", host_, " is gone"));
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return result;
    requests_.push_back([&, this] {
      absl::StatusOr<std::string> opened = absl::FailedPreconditionError(
          absl::StrCat("the link to ", host_, " has a tunnel already"));
      if (tunnel_ == nullptr) {
        ssh_set_blocking(session_->get(), 1);
        absl::StatusOr<std::unique_ptr<DaemonTunnel>> tunnel =
            DaemonTunnel::Open(session_->get(), host_, daemon, port_on_host);
        ssh_set_blocking(session_->get(), 0);
        if (tunnel.ok()) {
          tunnel_ = *std::move(tunnel);
          tunnel_->Watch(event_);
          opened = tunnel_->address_on_host();
        } else {
          opened = tunnel.status();
        }
      }
      absl::MutexLock lock(&done_mu);
      result = std::move(opened);
      done = true;
    });
  }
  Wake();
  absl::MutexLock lock(&done_mu);
  done_mu.Await(absl::Condition(&done));
  return result;
}

void RemoteShimLink::RunRequests() {
  std::deque<std::function<void()>> requests;
  {
    absl::MutexLock lock(&mu_);
    requests.swap(requests_);
  }
  for (auto& request : requests) request();
}

void RemoteShimLink::Run() {
  event_ = ssh_event_new();
  const auto drain = [](socket_t fd, int, void*) {
    uint64_t count;
    [[maybe_unused]] ssize_t got = read(fd, &count, sizeof count);
    return 0;
  };
  const auto from_daemon = [](socket_t fd, int, void* self) {
    auto* link = static_cast<RemoteShimLink*>(self);
    if (link->daemon_eof_ || link->to_shim_.size() >= kMaxBuffered) return 0;
    char buffer[kChunk];
    const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      link->to_shim_.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      link->daemon_eof_ = true;
    }
    return 0;
  };
  bool watched = event_ != nullptr &&
                 ssh_event_add_fd(event_, wake_.get(), POLLIN, drain, nullptr) == SSH_OK &&
                 ssh_event_add_fd(event_, link_end_.get(), POLLIN, from_daemon, this) == SSH_OK &&
                 ssh_event_add_session(event_, session_->get()) == SSH_OK;
  int timeout = 0;
  while (watched) {
    {
      absl::MutexLock lock(&mu_);
      if (quit_) break;
      if (!requests_.empty()) timeout = 0;
    }
    ssh_event_dopoll(event_, timeout);
    RunRequests();
    if (!Relay()) break;
    if (tunnel_) tunnel_->Pump();
    const bool backlogged =
        !to_shim_.empty() || !to_daemon_.empty() || (tunnel_ && tunnel_->Backlogged());
    timeout = backlogged ? kBackloggedPollMillis : kMaxPollMillis;
  }
  // Either side ended: the daemon's end reads end-of-file from here on.
  shutdown(link_end_.get(), SHUT_RDWR);
  std::deque<std::function<void()>> left;
  {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    left.swap(requests_);
  }
  for (auto& request : left) request();  // each finds the link ended or opens nothing
  if (event_ != nullptr) {
    tunnel_.reset();  // its sockets leave the event first
    ssh_event_remove_fd(event_, wake_.get());
    ssh_event_remove_fd(event_, link_end_.get());
    ssh_event_remove_session(event_, session_->get());
    ssh_event_free(event_);
    event_ = nullptr;
  }
  // Nothing more goes through: the connection closes now, not when the
  // launcher drops the link (it keeps retired links until it detaches).
  // The channel goes first (a disconnect frees what is left of its channels).
  ssh_channel_close(channel_);
  ssh_channel_free(channel_);
  channel_ = nullptr;
  ssh_disconnect(session_->get());
}

bool RemoteShimLink::Relay() {
  if (!ssh_is_connected(session_->get())) return false;
  if (!to_shim_.empty()) {
    const uint32_t n = static_cast<uint32_t>(std::min(to_shim_.size(), kChunk));
    const int written = ssh_channel_write(channel_, to_shim_.data(), n);
    if (written == SSH_ERROR) return false;
    if (written > 0) to_shim_.erase(0, static_cast<size_t>(written));
  }
  // The daemon closed its end (it detached or let the job go): so does the shim's.
  if (daemon_eof_ && to_shim_.empty()) return false;
  char buffer[kChunk];
  while (to_daemon_.size() < kMaxBuffered) {
    const int n = ssh_channel_read_nonblocking(channel_, buffer, sizeof buffer, 0);
    if (n == SSH_ERROR) return false;
    if (n <= 0) break;
    to_daemon_.append(buffer, static_cast<size_t>(n));
  }
  while (!to_daemon_.empty()) {
    const ssize_t n =
        send(link_end_.get(), to_daemon_.data(), to_daemon_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      to_daemon_.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      break;
    } else {
      return false;  // the daemon's end is closed
    }
  }
  const bool shim_gone = ssh_channel_is_eof(channel_) || ssh_channel_is_closed(channel_);
  return !(shim_gone && to_daemon_.empty());
}

}  // namespace horovodd::daemon
