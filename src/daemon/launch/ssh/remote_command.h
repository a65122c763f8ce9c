// The shell commands the SSH launcher runs on a remote host, and how it reads
// their first answer back. Everything the remote side gets travels inside one
// command string that the remote user's login shell (a POSIX shell) parses,
// so every word is single-quoted here and nothing is left for it to expand.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/launch/process_types.h"

namespace horovodd::daemon {

// `text` as one POSIX shell word: in single quotes, each ' written as '\''.
// Newlines, $, `, ;, spaces and quotes all come through unchanged.
std::string ShellQuote(std::string_view text);

// The remote shell prints this, a space and its pid before anything else.
inline constexpr char kRemotePidMarker[] = "horovodd-remote-pid";

// The command that starts `spec` on a remote host:
//   cd -- 'DIR' && echo horovodd-remote-pid $$ && exec env -i -- 'K=V'... 'ARGV'...
// The shell reports its own pid, then becomes the process (exec keeps the pid),
// so the reported pid is the process's. sshd starts each command in a session
// of its own (setsid), so that pid is also its process group id. `env -i` makes
// `spec.env` the complete environment, as the local launcher does; argv[0] is
// looked up through the PATH in `spec.env`. With no working_dir, the command
// runs in the remote user's home directory.
// INVALID_ARGUMENT for an empty argv, a NUL byte anywhere, a variable name that
// is empty or holds '=', an argv[0] with '=' (env would take it for a
// variable), or a command too long for a remote shell to accept.
//
// Secret variables (kRemoteSecretVariables, e.g. the job's worker token) are
// not in the command: a command line is visible to every user of the host
// (ps, /proc/PID/cmdline). The command reads them, one line each, from its
// stdin (RemoteLaunchStdin) in the shell that execs argv, after `env -i`, so
// they appear in no process's arguments.
absl::StatusOr<std::string> RemoteLaunchCommand(const LaunchSpec& spec);

// Environment variables that travel on stdin, never on a command line.
inline constexpr const char* kRemoteSecretVariables[] = {"HOROVODD_WORKER_TOKEN"};

// What the launcher writes to the command's stdin before closing it: the
// values of spec's secret variables, one per line, in kRemoteSecretVariables
// order (empty when it has none).
std::string RemoteLaunchStdin(const LaunchSpec& spec);

// Sends `sig` to process group `pgid`, or, where that is not a group, to the
// process `pgid` alone.
std::string RemoteKillCommand(int pgid, int sig);

// The pid in the marker line "horovodd-remote-pid 1234"; nullopt for any other line.
std::optional<int> ParseRemotePidLine(std::string_view line);

// The signal an SSH exit-signal message names ("KILL", "TERM", "SEGV"...: the
// signal's name without "SIG", RFC 4254), or 0 when the name is unknown.
int SignalFromSshName(std::string_view name);

}  // namespace horovodd::daemon
