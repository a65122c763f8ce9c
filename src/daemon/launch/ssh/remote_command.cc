#include "daemon/launch/ssh/remote_command.h"

#include <signal.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

// Linux refuses a single exec argument longer than 32 pages (MAX_ARG_STRLEN),
// and sshd hands the whole command to the shell as one argument.
constexpr size_t kMaxCommandBytes = 128 * 1024;

bool HasNul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

bool IsSecret(std::string_view name) {
  for (const char* secret : kRemoteSecretVariables) {
    if (name == secret) return true;
  }
  return false;
}

// The secret variables `spec` sets, in kRemoteSecretVariables order.
std::vector<std::string> SecretsOf(const LaunchSpec& spec) {
  std::vector<std::string> names;
  for (const char* secret : kRemoteSecretVariables) {
    if (spec.env.count(secret) != 0) names.push_back(secret);
  }
  return names;
}

absl::Status CheckSpec(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("the command is empty (argv[0] is missing)");
  }
  if (spec.argv[0].find('=') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot run '", spec.argv[0],
                     "' on a remote host: a command name with '=' would be "
                     "taken for an environment variable there"));
  }
  for (const std::string& arg : spec.argv) {
    if (HasNul(arg)) {
      return absl::InvalidArgumentError(absl::StrCat("argument '", arg, "' holds a NUL byte"));
    }
  }
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find('=') != std::string::npos || HasNul(name) || HasNul(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable '", name,
                       "' is invalid (empty name, '=' in the name, or a "
                       "NUL byte)"));
    }
    if (IsSecret(name) && value.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable '", name, "' holds a newline"));
    }
  }
  if (HasNul(spec.working_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("working directory '", spec.working_dir, "' holds a NUL byte"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShellQuote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";  // close the quotes, an escaped ', reopen them
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

absl::StatusOr<std::string> RemoteLaunchCommand(const LaunchSpec& spec) {
  HVDD_RETURN_IF_ERROR(CheckSpec(spec));
  std::string command;
  if (!spec.working_dir.empty()) {
    absl::StrAppend(&command, "cd -- ", ShellQuote(spec.working_dir), " && ");
  }
  absl::StrAppend(&command, "echo ", kRemotePidMarker, " $$ && exec env -i --");
  for (const auto& [name, value] : spec.env) {
    if (IsSecret(name)) continue;
    absl::StrAppend(&command, " ", ShellQuote(absl::StrCat(name, "=", value)));
  }
  const std::vector<std::string> secrets = SecretsOf(spec);
  if (!secrets.empty()) {
    // A shell in the clean environment reads the secrets from stdin, exports
    // them and becomes argv (exec keeps the pid all along).
    std::string reads;
    for (const std::string& name : secrets) {
      absl::StrAppend(&reads, "IFS= read -r ", name, " && export ", name, " && ");
    }
    absl::StrAppend(&command, " /bin/sh -c ", ShellQuote(absl::StrCat(reads, "exec \"$@\"")),
                    " sh");
  }
  for (const std::string& arg : spec.argv) absl::StrAppend(&command, " ", ShellQuote(arg));
  if (command.size() >= kMaxCommandBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the remote command for '", spec.argv[0], "' is ", command.size(),
                     " bytes with its environment and arguments; a remote shell accepts less than ",
                     kMaxCommandBytes));
  }
  return command;
}

std::string RemoteLaunchStdin(const LaunchSpec& spec) {
  std::string input;
  for (const std::string& name : SecretsOf(spec)) absl::StrAppend(&input, spec.env.at(name), "\n");
  return input;
}

std::string RemoteKillCommand(int pgid, int sig) {
  // `kill -N -PGID` is the one spelling dash, bash and zsh all accept.
  // Silent: the launcher reads nothing back from it.
  return absl::StrCat("kill -", sig, " -", pgid, " 2>/dev/null || kill -", sig, " ", pgid,
                      " 2>/dev/null");
}

std::optional<int> ParseRemotePidLine(std::string_view line) {
  const std::string_view marker = kRemotePidMarker;
  if (line.substr(0, marker.size()) != marker) return std::nullopt;
  std::string_view rest = line.substr(marker.size());
  if (rest.empty() || rest.front() != ' ') return std::nullopt;
  rest.remove_prefix(1);
  if (rest.empty() || !std::all_of(rest.begin(), rest.end(), absl::ascii_isdigit)) {
    return std::nullopt;
  }
  int pid = 0;
  if (!absl::SimpleAtoi(absl::string_view(rest.data(), rest.size()), &pid) || pid <= 0)
    return std::nullopt;
  return pid;
}

int SignalFromSshName(std::string_view name) {
  static constexpr std::pair<std::string_view, int> kSignals[] = {
      {"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"HUP", SIGHUP},
      {"ILL", SIGILL},   {"INT", SIGINT},   {"KILL", SIGKILL}, {"PIPE", SIGPIPE}, {"QUIT", SIGQUIT},
      {"SEGV", SIGSEGV}, {"SYS", SIGSYS},   {"TERM", SIGTERM}, {"TRAP", SIGTRAP}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
  };
  for (const auto& [ssh_name, number] : kSignals) {
    if (name == ssh_name) return number;
  }
  return 0;
}

}  // namespace horovodd::daemon
