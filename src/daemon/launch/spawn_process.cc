#include "daemon/launch/spawn_process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

// glibc >= 2.32: unlike strerror, safe to call from any thread.
const char* ErrnoText(int error) {
  const char* text = strerrordesc_np(error);
  return text ? text : "unknown error";
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// What the child sends through the report pipe when it cannot exec.
enum class Stage : int { kSetup = 1, kWorkingDir = 2, kExec = 3 };
struct ChildFailure {
  Stage stage;
  int error;
};

// Everything the child touches, prepared before fork (no allocation after it).
struct ChildArgs {
  pid_t parent_pid;
  int report_fd;
  int max_fd;  // for closing descriptors one by one where close_range is missing
  ChildStdio stdio;
  const char* working_dir;  // nullptr: keep the parent's
  char* const* candidates;  // nullptr-terminated
  char* const* argv;
  char* const* envp;
};

[[noreturn]] void ReportAndExit(int report_fd, Stage stage, int error) {
  const ChildFailure failure{stage, error};
  // Nothing to do if this fails: the parent then sees a child that exited 127.
  [[maybe_unused]] ssize_t written = write(report_fd, &failure, sizeof failure);
  _exit(127);
}

// errno values on which execvp goes on to the next PATH entry.
bool TryNextCandidate(int error) {
  return error == ENOENT || error == ENOTDIR || error == ESTALE || error == ENODEV ||
         error == ETIMEDOUT || error == EACCES;
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildArgs& a) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ReportAndExit(a.report_fd, Stage::kSetup, errno);
  // The parent may have died before the death signal was armed.
  if (getppid() != a.parent_pid) _exit(127);
  if (setpgid(0, 0) != 0) ReportAndExit(a.report_fd, Stage::kSetup, errno);

  // Ignored signals and the (I/O thread's) blocked mask survive exec: reset
  // both so the program starts as it would from a shell. sigaction fails for
  // SIGKILL, SIGSTOP and glibc's internal signals, which is fine.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (dup2(a.stdio.stdin_fd, STDIN_FILENO) < 0 || dup2(a.stdio.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(a.stdio.stderr_fd, STDERR_FILENO) < 0) {
    ReportAndExit(a.report_fd, Stage::kSetup, errno);
  }
  // Close every inherited descriptor at exec; the report pipe is already
  // close-on-exec and must stay open until then.
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < a.max_fd; ++fd) {
      if (fd != a.report_fd) close(fd);
    }
  }

  if (a.working_dir != nullptr && chdir(a.working_dir) != 0) {
    ReportAndExit(a.report_fd, Stage::kWorkingDir, errno);
  }
  // The PATH search of execvp: EACCES wins over ENOENT if no candidate runs.
  int error = ENOENT;
  bool denied = false;
  for (char* const* path = a.candidates; *path != nullptr; ++path) {
    execve(*path, a.argv, a.envp);
    error = errno;
    if (error == EACCES) denied = true;
    if (!TryNextCandidate(error)) break;
  }
  if (TryNextCandidate(error) && denied) error = EACCES;
  ReportAndExit(a.report_fd, Stage::kExec, error);
}

absl::Status FailureStatus(const ExecPlan& plan, const ChildFailure& failure) {
  const std::string& program = plan.argv[0];
  switch (failure.stage) {
    case Stage::kWorkingDir:
      return absl::Status(absl::ErrnoToStatusCode(failure.error),
                          absl::StrCat("cannot change to working directory '", plan.working_dir,
                                       "' to run '", program, "': ", ErrnoText(failure.error)));
    case Stage::kExec:
      return absl::Status(
          absl::ErrnoToStatusCode(failure.error),
          absl::StrCat("cannot execute '", program, "': ", ErrnoText(failure.error)));
    case Stage::kSetup:
      break;
  }
  return absl::InternalError(
      absl::StrCat("cannot set up the process for '", program, "': ", ErrnoText(failure.error)));
}

std::vector<char*> NullTerminated(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

absl::StatusOr<ExecPlan> ExecPlan::Create(const LaunchSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("argv is empty: nothing to execute");
  if (spec.argv[0].empty()) return absl::InvalidArgumentError("argv[0] is empty");
  for (size_t i = 0; i < spec.argv.size(); ++i) {
    if (HasNul(spec.argv[i])) {
      return absl::InvalidArgumentError(absl::StrCat("argv[", i, "] contains a NUL byte"));
    }
  }
  ExecPlan plan;
  plan.argv = spec.argv;
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || absl::StrContains(name, '=') || HasNul(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable name '", name, "' is invalid (empty, or contains '=' or NUL)"));
    }
    if (HasNul(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", name, " contains a NUL byte"));
    }
    plan.env.push_back(absl::StrCat(name, "=", value));
  }
  if (HasNul(spec.working_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("working directory '", spec.working_dir, "' contains a NUL byte"));
  }
  plan.working_dir = spec.working_dir;

  const std::string& program = spec.argv[0];
  if (absl::StrContains(program, '/')) {
    plan.candidates.push_back(program);
    return plan;
  }
  std::string search_path = "/bin:/usr/bin";
  if (auto it = spec.env.find("PATH"); it != spec.env.end()) {
    search_path = it->second;
  } else if (const char* own = std::getenv("PATH"); own != nullptr) {
    search_path = own;
  }
  for (absl::string_view dir : absl::StrSplit(search_path, ':')) {
    // An empty entry means the current (that is: the working) directory.
    plan.candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", program));
  }
  return plan;
}

absl::StatusOr<UniqueFd> MoveAboveStdio(UniqueFd fd) {
  if (fd.get() > STDERR_FILENO) return fd;
  UniqueFd moved(fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1));
  if (!moved.valid()) {
    return absl::InternalError(
        absl::StrCat("cannot move descriptor ", fd.get(), " above 2: ", ErrnoText(errno)));
  }
  return moved;
}

absl::StatusOr<pid_t> SpawnProcess(const ExecPlan& plan, const ChildStdio& stdio) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("cannot create the start report pipe for '", plan.argv[0],
                                     "': ", ErrnoText(errno)));
  }
  UniqueFd report_read(report[0]);
  HVDD_ASSIGN_OR_RETURN(UniqueFd report_write, MoveAboveStdio(UniqueFd(report[1])));

  const std::vector<char*> argv = NullTerminated(plan.argv);
  const std::vector<char*> envp = NullTerminated(plan.env);
  const std::vector<char*> candidates = NullTerminated(plan.candidates);
  struct rlimit files = {};
  getrlimit(RLIMIT_NOFILE, &files);
  ChildArgs args;
  args.parent_pid = getpid();
  args.report_fd = report_write.get();
  args.max_fd = static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20));
  args.stdio = stdio;
  args.working_dir = plan.working_dir.empty() ? nullptr : plan.working_dir.c_str();
  args.candidates = candidates.data();
  args.argv = argv.data();
  args.envp = envp.data();

  const pid_t pid = fork();
  if (pid < 0) {
    return absl::Status(
        absl::ErrnoToStatusCode(errno),
        absl::StrCat("cannot fork to run '", plan.argv[0], "': ", ErrnoText(errno)));
  }
  if (pid == 0) RunChild(args);

  report_write.Reset();
  ChildFailure failure = {};
  ssize_t got;
  do {
    got = read(report_read.get(), &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return pid;  // exec closed the pipe: the program runs

  // The child failed before exec and exits at once: reap it, no zombie stays.
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof failure)) {
    return absl::InternalError(
        absl::StrCat("lost the start report of '", plan.argv[0], "' (read ", got, " bytes)"));
  }
  return FailureStatus(plan, failure);
}

}  // namespace horovodd::daemon
