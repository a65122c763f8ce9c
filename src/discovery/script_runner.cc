#include "discovery/script_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace horovodd::discovery {
namespace {

constexpr size_t kStderrTailBytes = 4096;  // enough for the last line of an error report
constexpr size_t kMaxReportedStderrChars = 200;
constexpr size_t kReadChunkBytes = 64 * 1024;

std::string ErrnoText(int err) { return std::generic_category().message(err); }

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Builds every error so that each one names the script.
class ScriptErrors {
 public:
  // "discovery script ./x" or "command 'scontrol show job 5'".
  explicit ScriptErrors(absl::string_view what) : prefix_(absl::StrCat(what, ": ")) {}

  template <typename... Parts>
  std::string Message(const Parts&... parts) const {
    return absl::StrCat(prefix_, parts...);
  }

 private:
  std::string prefix_;
};

// Catches the usual mistakes before spawning, so they get precise messages.
absl::Status CheckExecutable(const std::string& path, const ScriptErrors& errors) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(errors.Message("not found"));
    if (err == EACCES) {
      return absl::PermissionDeniedError(errors.Message("not accessible: ", ErrnoText(err)));
    }
    return absl::InternalError(errors.Message("cannot stat: ", ErrnoText(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(errors.Message("not executable (it is a directory)"));
  }
  if (access(path.c_str(), X_OK) != 0) {
    return absl::PermissionDeniedError(errors.Message("not executable"));
  }
  return absl::OkStatus();
}

struct Pipe {
  UniqueFd read_end;   // ours, non-blocking
  UniqueFd write_end;  // the script's; closed here once it is spawned
};

absl::StatusOr<Pipe> MakePipe(const ScriptErrors& errors) {
  int fds[2];
  // Close-on-exec, so a launcher forking in another thread cannot leak our pipe into its
  // workers; the script gets its end through dup2, which clears the flag.
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(errors.Message("cannot create a pipe: ", ErrnoText(errno)));
  }
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  // Only our end: the script's stdout must stay blocking, or its writes would fail.
  if (fcntl(pipe.read_end.get(), F_SETFL, O_NONBLOCK) != 0) {
    return absl::InternalError(errors.Message("cannot configure a pipe: ", ErrnoText(errno)));
  }
  return pipe;
}

// posix_spawn's attribute and file-action objects, destroyed on every path.
class SpawnConfig {
 public:
  SpawnConfig() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  ~SpawnConfig() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnConfig(const SpawnConfig&) = delete;
  SpawnConfig& operator=(const SpawnConfig&) = delete;

  // The script's descriptors and signal state: a clean process in a group of its own.
  int Prepare(int stdout_fd, int stderr_fd) {
    int rc = posix_spawn_file_actions_addopen(&actions_, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions_, stdout_fd, STDOUT_FILENO);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions_, stderr_fd, STDERR_FILENO);
    // The daemon's sockets and files are none of the script's business.
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions_, STDERR_FILENO + 1);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    // A group of its own, so one kill reaches everything it starts; signals the daemon
    // blocks or ignores are restored for the script.
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr_, 0);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr_, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr_, &all);
    if (rc == 0) {
      rc = posix_spawnattr_setflags(
          &attr_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    }
    return rc;
  }

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

absl::StatusOr<pid_t> Spawn(const std::string& path, const std::vector<std::string>& args,
                            int stdout_fd, int stderr_fd, const ScriptErrors& errors) {
  SpawnConfig config;
  if (int rc = config.Prepare(stdout_fd, stderr_fd); rc != 0) {
    return absl::InternalError(errors.Message("cannot prepare to spawn: ", ErrnoText(rc)));
  }
  // posix_spawn (not posix_spawnp) runs exactly this path, never through /bin/sh.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, path.c_str(), config.actions(), config.attr(), argv.data(), environ);
  switch (rc) {
    case 0:
      return pid;
    case ENOENT:  // the file was there a moment ago: it is the #! interpreter that is missing
      return absl::NotFoundError(errors.Message("not found (or its #! interpreter is missing)"));
    case EACCES:
      return absl::PermissionDeniedError(errors.Message("not executable: ", ErrnoText(rc)));
    case ENOEXEC:
      return absl::PermissionDeniedError(
          errors.Message("not executable: ", ErrnoText(rc), " (a script needs a #! line)"));
    default:
      return absl::InternalError(errors.Message("cannot spawn: ", ErrnoText(rc)));
  }
}

// Kills the whole group (the script and whatever it started), then reaps the script. Called
// while the script is still unreaped, so its pid -- the group id -- cannot have been reused.
int KillGroupAndReap(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);  // in case the script moved itself to another group
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The last non-empty stderr line, made printable and short.
std::string LastLine(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  const size_t newline = text.rfind('\n');
  if (newline != absl::string_view::npos) text.remove_prefix(newline + 1);
  std::string line(absl::StripAsciiWhitespace(text).substr(0, kMaxReportedStderrChars));
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return line;
}

// Everything the parent learns while the script runs.
struct Capture {
  std::string out;
  std::string err_tail;  // the last kStderrTailBytes of stderr
  bool exited = false;   // exited by itself (then reaped, with `wait_status`)
  int wait_status = 0;
  bool timed_out = false;
  bool overflowed = false;
};

// Reads what is available from `fd`; false at end of file (or a read error, the same for us).
bool ReadAvailable(int fd, std::string& sink) {
  char buffer[kReadChunkBytes];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n > 0) {
    sink.append(buffer, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

int PollTimeoutMs(absl::Duration remaining) {
  if (remaining == absl::InfiniteDuration()) return -1;
  // Round up, so the loop does not spin through the last fraction of a millisecond.
  const int64_t ms = absl::ToInt64Milliseconds(remaining) + 1;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// Reads everything already queued in `fd`, closing it at end of file; never waits.
void DrainQueued(UniqueFd& fd, std::string& sink) {
  while (fd.valid()) {
    char buffer[kReadChunkBytes];
    const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      sink.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      fd.Reset();
    } else if (errno == EAGAIN) {
      return;  // a writer still holds it open
    }
  }
}

// The last look at the deadline. A script's exit and its pipes' end of file arrive in
// separate polls, so a script that ended just before the deadline can still have them (and
// its last words) queued: take what is there without waiting, and call it a timeout only if
// the script, or a writer of its pipes, really is still running.
void FinishAtDeadline(pid_t pid, int pidfd, UniqueFd& out, UniqueFd& err, Capture& capture) {
  if (!capture.exited) {
    pollfd exit_fd{pidfd, POLLIN, 0};
    if (poll(&exit_fd, 1, 0) == 1) {
      capture.wait_status = KillGroupAndReap(pid);
      capture.exited = true;
    }
  }
  DrainQueued(out, capture.out);
  DrainQueued(err, capture.err_tail);
  if (capture.err_tail.size() > kStderrTailBytes) {
    capture.err_tail.erase(0, capture.err_tail.size() - kStderrTailBytes);
  }
  capture.overflowed = capture.out.size() > kMaxScriptOutputBytes;
  capture.timed_out = !capture.exited || out.valid() || err.valid();
}

// Drains both pipes until the script has exited and every writer has closed them, the
// deadline passes, or stdout grows past the cap.
absl::Status Collect(pid_t pid, int pidfd, UniqueFd out, UniqueFd err, absl::Time deadline,
                     Capture& capture, const ScriptErrors& errors) {
  while (!capture.exited || out.valid() || err.valid()) {
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) {
      FinishAtDeadline(pid, pidfd, out, err, capture);
      return absl::OkStatus();
    }
    pollfd fds[3];
    nfds_t count = 0;
    if (out.valid()) fds[count++] = {out.get(), POLLIN, 0};
    if (err.valid()) fds[count++] = {err.get(), POLLIN, 0};
    if (!capture.exited) fds[count++] = {pidfd, POLLIN, 0};
    if (poll(fds, count, PollTimeoutMs(remaining)) < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(errors.Message("poll failed: ", ErrnoText(errno)));
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == pidfd) {
        // Exited: whatever it left running in its group goes too, which also closes the
        // pipes those processes held.
        capture.wait_status = KillGroupAndReap(pid);
        capture.exited = true;
      } else if (fds[i].fd == out.get()) {
        if (!ReadAvailable(out.get(), capture.out)) out.Reset();
        if (capture.out.size() > kMaxScriptOutputBytes) {
          capture.overflowed = true;
          return absl::OkStatus();
        }
      } else {
        if (!ReadAvailable(err.get(), capture.err_tail)) err.Reset();
        if (capture.err_tail.size() > kStderrTailBytes) {
          capture.err_tail.erase(0, capture.err_tail.size() - kStderrTailBytes);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Outcome(Capture capture, absl::Duration timeout,
                                    const ScriptErrors& errors) {
  if (capture.overflowed) {
    return absl::ResourceExhaustedError(
        errors.Message("printed more than ", kMaxScriptOutputBytes, " bytes on stdout"));
  }
  if (capture.timed_out) {
    if (capture.exited) {
      return absl::DeadlineExceededError(
          errors.Message("exited, but a process it started outside its process group kept "
                         "its stdout or stderr open past the ",
                         absl::FormatDuration(timeout), " timeout"));
    }
    return absl::DeadlineExceededError(
        errors.Message("timed out after ", absl::FormatDuration(timeout)));
  }
  const std::string last_line = LastLine(capture.err_tail);
  const std::string detail = last_line.empty() ? "" : absl::StrCat(": ", last_line);
  const int status = capture.wait_status;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::move(capture.out);
  if (WIFEXITED(status)) {
    return absl::UnavailableError(
        errors.Message("exited with status ", WEXITSTATUS(status), detail));
  }
  const int sig = WTERMSIG(status);
  const char* abbrev = sigabbrev_np(sig);
  return absl::UnavailableError(
      errors.Message("killed by signal ", sig, " (SIG", abbrev ? abbrev : "?", ")", detail));
}

// Runs `path` with `args` as RunDiscoveryScript documents, errors prefixed by `errors`.
absl::StatusOr<std::string> RunCaptured(const std::string& path,
                                        const std::vector<std::string>& args,
                                        absl::Duration timeout, const ScriptErrors& errors) {
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        errors.Message("timeout ", absl::FormatDuration(timeout), " is not positive"));
  }
  HVDD_RETURN_IF_ERROR(CheckExecutable(path, errors));

  HVDD_ASSIGN_OR_RETURN(Pipe out, MakePipe(errors));
  HVDD_ASSIGN_OR_RETURN(Pipe err, MakePipe(errors));

  const absl::Time deadline = absl::Now() + timeout;
  HVDD_ASSIGN_OR_RETURN(pid_t pid,
                        Spawn(path, args, out.write_end.get(), err.write_end.get(), errors));
  // Only the script holds the write ends now, so its exit is our end of file.
  out.write_end.Reset();
  err.write_end.Reset();

  // A pidfd turns "the script exited" into a readable descriptor we can poll with the pipes.
  // (The raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C" and cannot be used from C++.)
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    const int pidfd_errno = errno;
    KillGroupAndReap(pid);
    return absl::InternalError(errors.Message("pidfd_open failed: ", ErrnoText(pidfd_errno)));
  }

  Capture capture;
  absl::Status collected = Collect(pid, pidfd.get(), std::move(out.read_end),
                                   std::move(err.read_end), deadline, capture, errors);
  if (!capture.exited) KillGroupAndReap(pid);
  if (!collected.ok()) return collected;
  return Outcome(std::move(capture), timeout, errors);
}

}  // namespace

absl::StatusOr<std::string> RunDiscoveryScript(const std::string& path, absl::Duration timeout) {
  return RunCaptured(path, {}, timeout, ScriptErrors(absl::StrCat("discovery script ", path)));
}

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCommand: no command given");
  const ScriptErrors errors(absl::StrCat("command '", absl::StrJoin(argv, " "), "'"));
  const std::string path = FindInPath(argv[0]);
  if (path.empty()) {
    return absl::NotFoundError(errors.Message(argv[0], " is not in PATH"));
  }
  return RunCaptured(path, std::vector<std::string>(argv.begin() + 1, argv.end()), timeout, errors);
}

}  // namespace horovodd::discovery
