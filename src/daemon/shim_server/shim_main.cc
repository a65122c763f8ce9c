// horovodd-shim: supervises one job's workers on one host for horovodd
// (shim_server.h), so they outlive a daemon restart.
//
//   horovodd-shim --job ID --socket PATH [--log PATH] [--idle-timeout-s N]
//                 [--buffered-lines N] [--foreground]
//
// It listens on PATH first, then detaches (fork, setsid: its own session, no
// longer the daemon's child, so nothing that kills the daemon reaches it) and
// the process the daemon started exits 0: that exit says the socket is ready.
// Any failure before that is printed to stderr (the log) and exits 1.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/shim_protocol/shim_protocol.h"
#include "daemon/shim_server/shim_server.h"

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "horovodd-shim: %s\nusage: horovodd-shim --job ID --socket PATH [--log PATH] "
               "[--idle-timeout-s N] [--buffered-lines N] [--foreground]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace horovodd::shim;
  ShimServerOptions options;
  std::string socket_path;
  std::string log_path;
  bool foreground = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--job") {
      if (!value(options.job_id)) return Usage("--job needs a value");
    } else if (arg == "--socket") {
      if (!value(socket_path)) return Usage("--socket needs a value");
    } else if (arg == "--log") {
      if (!value(log_path)) return Usage("--log needs a value");
    } else if (arg == "--idle-timeout-s") {
      double seconds = 0;
      if (!value(text) || !absl::SimpleAtod(text, &seconds) || seconds <= 0) {
        return Usage("--idle-timeout-s needs a positive number of seconds");
      }
      options.idle_timeout = absl::Seconds(seconds);
    } else if (arg == "--buffered-lines") {
      int lines = 0;
      if (!value(text) || !absl::SimpleAtoi(text, &lines) || lines <= 0) {
        return Usage("--buffered-lines needs a positive number");
      }
      options.max_buffered_lines = static_cast<size_t>(lines);
    } else if (arg == "--foreground") {
      foreground = true;
    } else {
      return Usage(absl::StrCat("unknown argument '", arg, "'"));
    }
  }
  if (options.job_id.empty() || socket_path.empty()) return Usage("--job and --socket are needed");

  if (!log_path.empty()) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log < 0) {
      std::fprintf(stderr, "horovodd-shim: cannot open log %s: %s\n", log_path.c_str(),
                   strerror(errno));
      return 1;
    }
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    close(log);
  }
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    close(null);
  }

  absl::StatusOr<int> listener = ListenUnix(socket_path);
  if (!listener.ok()) {
    std::fprintf(stderr, "horovodd-shim: %s\n", std::string(listener.status().message()).c_str());
    return 1;
  }
  if (!foreground) {
    const pid_t child = fork();
    if (child < 0) {
      std::fprintf(stderr, "horovodd-shim: cannot fork: %s\n", strerror(errno));
      return 1;
    }
    if (child > 0) _exit(0);  // the daemon's child ends: the socket is ready
    setsid();
  }
  // Signals are read from a signalfd on the serving thread, so they are
  // blocked before any thread starts (the workers get an empty mask).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  horovodd::daemon::UniqueFd signals(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));

  std::fprintf(stderr, "horovodd-shim: pid %d serving job %s on %s\n", getpid(),
               options.job_id.c_str(), socket_path.c_str());
  absl::StatusOr<std::unique_ptr<ShimServer>> server = ShimServer::Create(
      options, horovodd::daemon::UniqueFd(*listener), std::move(signals));
  if (!server.ok()) {
    std::fprintf(stderr, "horovodd-shim: %s\n", std::string(server.status().message()).c_str());
    unlink(socket_path.c_str());
    return 1;
  }
  (*server)->Run();
  unlink(socket_path.c_str());
  server->reset();
  std::fprintf(stderr, "horovodd-shim: pid %d done\n", getpid());
  return 0;
}
