// What a launcher is asked to run and what it reports back. Shared by every
// launcher (local fork/exec now, remote over SSH later) so the job driver
// handles all workers the same way.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace horovodd::daemon {

enum class OutputStream { kStdout, kStderr };

struct ExitInfo {
  int exit_code = 0;         // valid when signal == 0; -1 if the status was lost
  int signal = 0;            // the signal that killed it, or 0
  bool core_dumped = false;  // only with signal != 0

  bool success() const { return signal == 0 && exit_code == 0; }
  // "exited with status 3", "killed by signal 9 (Killed)",
  // "killed by signal 11 (Segmentation fault), core dumped".
  std::string Describe() const;
};

struct LaunchSpec {
  // argv[0] is resolved like execvp does, through the PATH of `env` (the
  // daemon's own PATH when `env` has none). Relative paths are relative to
  // working_dir. No shell is involved unless argv asks for one.
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the COMPLETE environment of the child
  std::string working_dir;                 // empty: the daemon's
};

struct ProcessCallbacks {
  // One call per line (without the newline); a last line without '\n' comes at
  // EOF; a line over 64 KiB is delivered in pieces. Lines of one stream come in
  // order; `line` is valid during the call only. Called on the launcher's I/O
  // thread: must not block.
  std::function<void(OutputStream, std::string_view line)> on_line;
  // Exactly once, after all output of the process was delivered. Same thread.
  std::function<void(const ExitInfo&)> on_exit;
};

}  // namespace horovodd::daemon
