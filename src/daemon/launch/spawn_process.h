// Starts one child process. In a threaded daemon only async-signal-safe calls
// are allowed between fork and exec, so everything exec needs is validated and
// prepared first (ExecPlan), and the child reports a failure before or at exec
// back through a close-on-exec pipe instead of printing it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/launch/process_types.h"

namespace horovodd::daemon {

// A LaunchSpec checked and turned into what exec needs.
struct ExecPlan {
  // INVALID_ARGUMENT for an empty argv or argv[0], a NUL byte in any string,
  // or an environment variable name that is empty or contains '='.
  static absl::StatusOr<ExecPlan> Create(const LaunchSpec& spec);

  std::vector<std::string> argv;
  std::vector<std::string> env;         // "NAME=value"
  std::vector<std::string> candidates;  // paths exec tries in order (the PATH search)
  std::string working_dir;              // empty: keep the caller's
};

// The descriptors the child gets as its fds 0, 1 and 2. All must be above 2.
struct ChildStdio {
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Forks and execs `plan`. The child gets its own process group, `stdio`, no
// other descriptors, default signal dispositions, an empty signal mask, and
// SIGKILL as its parent-death signal: it dies when the calling THREAD exits,
// so call this from a thread that lives as long as the children should.
// Returns the pid once exec succeeded. When the working directory or exec
// fails, the child is reaped and the status says what failed, e.g. NOT_FOUND
// "cannot execute 'x': No such file or directory" (the code follows errno).
absl::StatusOr<pid_t> SpawnProcess(const ExecPlan& plan, const ChildStdio& stdio);

// Returns `fd` if it is above 2, else a close-on-exec duplicate above 2, so a
// daemon started with closed stdio cannot hand a child the wrong descriptor.
absl::StatusOr<UniqueFd> MoveAboveStdio(UniqueFd fd);

}  // namespace horovodd::daemon
