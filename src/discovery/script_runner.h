// Runs a host discovery script and captures what it prints.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace horovodd::discovery {

// Most bytes a discovery script may print on stdout (a host per line: ~50,000 hosts).
inline constexpr size_t kMaxScriptOutputBytes = size_t{1} << 20;

// Runs the executable at `path` WITHOUT a shell: no arguments, stdin from /dev/null, the
// caller's environment, no descriptors beyond 0-2, default signal handling, in a process
// group of its own. Returns its stdout. When the script exits, runs past `timeout` or prints
// too much, its whole process group is killed (nothing it started outlives it) and it is
// reaped (no zombie).
// Errors, each naming the path:
//   NOT_FOUND          "discovery script ./x: not found"
//   PERMISSION_DENIED  "discovery script ./x: not executable"
//   UNAVAILABLE        "discovery script ./x: exited with status 3: <last stderr line>",
//                      "discovery script ./x: killed by signal 9 (SIGKILL)"
//   DEADLINE_EXCEEDED  "discovery script ./x: timed out after 5s"
//   RESOURCE_EXHAUSTED "discovery script ./x: printed more than 1048576 bytes on stdout"
//   INVALID_ARGUMENT   a timeout that is not positive
//   INTERNAL           a system call failed
// Blocks the calling thread for about `timeout` at most; several threads may call it at once.
// Nothing else in the process may reap the script: do not set SIGCHLD to SIG_IGN and do not
// call waitpid(-1, ...) or wait().
absl::StatusOr<std::string> RunDiscoveryScript(const std::string& path, absl::Duration timeout);

// The same for a command with arguments (the Slurm host source runs scontrol this way):
// argv[0] is looked up in PATH unless it holds a '/', and every error names the whole
// command, "command 'scontrol -o show job 7': exited with status 1: <last stderr line>".
// NOT_FOUND when argv[0] is not in PATH. argv must not be empty.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       absl::Duration timeout);

// The executable `name` resolves to through $PATH (as execvp would), or "" when there is
// none; a name holding '/' is returned as it is.
std::string FindInPath(const std::string& name);

}  // namespace horovodd::discovery
