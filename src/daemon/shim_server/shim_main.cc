// horovodd-shim: supervises one job's workers on one host for horovodd
// (shim_server.h), so they outlive a daemon restart.
//
//   horovodd-shim --job ID --socket PATH [--log PATH] [--idle-timeout-s N]
//                 [--buffered-lines N] [--foreground]
//
// It listens on PATH first, then detaches (fork, setsid: its own session, no
// longer the daemon's child, so nothing that kills the daemon reaches it) and
// the process the daemon started exits 0: that exit says the socket is ready.
// Its log is stderr (--log PATH redirects it), lines "horovodd-shim: ..."
// through common/log.h. Any failure before the detach is logged and exits 1;
// a bad command line prints the usage and exits 2. HOROVODD_SHIM_RELAY=1 in
// its environment relays its workers' daemon traffic (ShimServerOptions::relay).
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
#include "common/log.h"
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
  horovodd::SetLogPrefix("horovodd-shim");
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
  // Inherited from the daemon that starts a local shim; a job's environment
  // may say it per launch instead (ShimServerOptions::relay).
  if (const char* relay = getenv("HOROVODD_SHIM_RELAY"); relay != nullptr) {
    options.relay = std::string(relay) == "1";
  }

  if (!log_path.empty()) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log < 0) {
      const char* why = strerror(errno);
      HVDD_LOG(ERROR) << "cannot open log " << log_path << ": " << why;
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
    HVDD_LOG(ERROR) << listener.status().message();
    return 1;
  }
  if (!foreground) {
    const pid_t child = fork();
    if (child < 0) {
      const char* why = strerror(errno);
      HVDD_LOG(ERROR) << "cannot fork: " << why;
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

  HVDD_LOG(INFO) << "pid " << getpid() << " serving job " << options.job_id << " on "
                 << socket_path;
  absl::StatusOr<std::unique_ptr<ShimServer>> server =
      ShimServer::Create(options, horovodd::daemon::UniqueFd(*listener), std::move(signals));
  if (!server.ok()) {
    HVDD_LOG(ERROR) << server.status().message();
    unlink(socket_path.c_str());
    return 1;
  }
  (*server)->Run();
  unlink(socket_path.c_str());
  server->reset();
  HVDD_LOG(INFO) << "pid " << getpid() << " done";
  return 0;
}
