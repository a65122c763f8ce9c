// The local launcher against real processes (/bin/sh and coreutils).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/launch/local_launcher.h"
#include "process_recorder.h"
#include "wait_until.h"

namespace horovodd::daemon {
namespace {

using testing::ProcessRecorder;
using testing::WaitUntil;

std::unique_ptr<LocalLauncher> MakeLauncher(const LocalLauncherOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<LocalLauncher>> launcher = LocalLauncher::Create(options);
  REQUIRE(launcher.ok());
  return std::move(*launcher);
}

LaunchSpec Spec(std::vector<std::string> argv) {
  LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  return spec;
}

LaunchSpec Shell(const std::string& script) { return Spec({"/bin/sh", "-c", script}); }

// Launches `spec` here; its pid (the launcher's handle for it).
absl::StatusOr<pid_t> Start(LocalLauncher& launcher, const LaunchSpec& spec,
                            ProcessCallbacks callbacks) {
  WorkerLaunch launch;
  launch.spec = spec;
  absl::StatusOr<LaunchedProcess> launched = launcher.Launch(launch, std::move(callbacks));
  if (!launched.ok()) return launched.status();
  return launched->pid;
}

pid_t LaunchOk(LocalLauncher& launcher, const LaunchSpec& spec, ProcessRecorder& recorder) {
  absl::StatusOr<pid_t> pid = Start(launcher, spec, recorder.Callbacks());
  INFO(pid.status().ToString());
  REQUIRE(pid.ok());
  return *pid;
}

// Alive means: exists and is not a zombie (an orphaned zombie may wait for a
// container's init to reap it, but it runs nothing).
bool IsAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = content.rfind(')');
  if (paren == std::string::npos || paren + 2 >= content.size()) return false;  // just gone
  const char state = content[paren + 2];
  return state != 'Z' && state != 'X';
}

// The name of the program a process runs ("" once it is gone).
std::string Command(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

// Kills a process the launcher does not own (one that left its process group).
struct KillOnExit {
  pid_t pid;
  ~KillOnExit() {
    if (pid > 0) kill(pid, SIGKILL);
  }
};

std::vector<std::string> Numbers(int from, int to) {
  std::vector<std::string> numbers;
  for (int i = from; i <= to; ++i) numbers.push_back(std::to_string(i));
  return numbers;
}

TEST_CASE("Launcher reports exit status 0 and 3", "[launcher]") {
  ProcessRecorder zero, three;
  auto launcher = MakeLauncher();
  LaunchOk(*launcher, Spec({"true"}), zero);
  LaunchOk(*launcher, Shell("exit 3"), three);

  const ExitInfo ok = zero.AwaitExit();
  CHECK(ok.success());
  CHECK(ok.exit_code == 0);
  CHECK(ok.signal == 0);
  CHECK(ok.Describe() == "exited with status 0");

  const ExitInfo failed = three.AwaitExit();
  CHECK_FALSE(failed.success());
  CHECK(failed.exit_code == 3);
  CHECK(failed.signal == 0);
  CHECK(failed.Describe() == "exited with status 3");
}

TEST_CASE("Launcher reports a process killed by SIGKILL", "[launcher]") {
  ProcessRecorder signalled, self_killed;
  auto launcher = MakeLauncher();
  const pid_t pid = LaunchOk(*launcher, Spec({"sleep", "1000"}), signalled);
  LaunchOk(*launcher, Shell("kill -KILL $$"), self_killed);

  REQUIRE(launcher->Signal(pid, SIGKILL).ok());
  const ExitInfo killed = signalled.AwaitExit();
  CHECK_FALSE(killed.success());
  CHECK(killed.signal == SIGKILL);
  CHECK(killed.Describe() == "killed by signal 9 (Killed)");
  CHECK(self_killed.AwaitExit().signal == SIGKILL);
}

TEST_CASE("Launcher delivers every stdout and stderr line in order", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  // Both streams at full speed at the same time: about 600 KB each.
  LaunchOk(*launcher, Shell("seq 1 100000 & seq 1 100000 >&2; wait"), recorder);
  CHECK(recorder.AwaitExit().success());
  const std::vector<std::string> expected = Numbers(1, 100000);
  CHECK(recorder.Lines(OutputStream::kStdout) == expected);
  CHECK(recorder.Lines(OutputStream::kStderr) == expected);
  CHECK_FALSE(recorder.line_after_exit());
}

TEST_CASE("Launcher delivers a last line without newline before on_exit", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  LaunchOk(*launcher, Shell("printf 'first\\nlast'; printf 'only-err' >&2; exit 5"), recorder);
  CHECK(recorder.AwaitExit().exit_code == 5);
  CHECK(recorder.Lines(OutputStream::kStdout) == std::vector<std::string>{"first", "last"});
  CHECK(recorder.Lines(OutputStream::kStderr) == std::vector<std::string>{"only-err"});
  CHECK_FALSE(recorder.line_after_exit());
}

TEST_CASE("Launcher delivers a very long line in 64 KiB pieces", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  LaunchOk(*launcher, Shell("head -c 200000 /dev/zero | tr '\\0' x; echo; echo after"), recorder);
  CHECK(recorder.AwaitExit().success());
  const std::vector<std::string> lines = recorder.Lines(OutputStream::kStdout);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].size() == 65536);
  CHECK(lines[1].size() == 65536);
  CHECK(lines[2].size() == 65536);
  CHECK(lines[3].size() == 200000 - 3 * 65536);
  CHECK(lines[0] + lines[1] + lines[2] + lines[3] == std::string(200000, 'x'));
  CHECK(lines[4] == "after");
}

TEST_CASE("Launcher gives the child exactly the environment of the spec", "[launcher]") {
  REQUIRE(setenv("HVDD_LAUNCHER_TEST_DAEMON_ONLY", "1", 1) == 0);
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  LaunchSpec spec = Spec({"env"});
  spec.env["HVDD_GREETING"] = "hello world";
  LaunchOk(*launcher, spec, recorder);
  CHECK(recorder.AwaitExit().success());
  CHECK(recorder.Lines(OutputStream::kStdout) ==
        std::vector<std::string>{"HVDD_GREETING=hello world", "PATH=/usr/bin:/bin"});
  unsetenv("HVDD_LAUNCHER_TEST_DAEMON_ONLY");
}

TEST_CASE("Launcher runs the child in the working directory of the spec", "[launcher]") {
  char dir_template[] = "/tmp/hvdd-launcher-cwd-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  char resolved[PATH_MAX];
  REQUIRE(realpath(dir_template, resolved) != nullptr);
  {
    ProcessRecorder recorder;
    auto launcher = MakeLauncher();
    LaunchSpec spec = Spec({"pwd"});
    spec.working_dir = dir_template;
    LaunchOk(*launcher, spec, recorder);
    CHECK(recorder.AwaitExit().success());
    CHECK(recorder.Lines(OutputStream::kStdout) == std::vector<std::string>{resolved});
  }
  rmdir(dir_template);
}

TEST_CASE("Launcher fails clearly when the program does not exist", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();

  absl::StatusOr<pid_t> by_name =
      Start(*launcher, Spec({"hvdd-no-such-program"}), recorder.Callbacks());
  CHECK(by_name.status().code() == absl::StatusCode::kNotFound);
  CHECK(by_name.status().message() ==
        "cannot execute 'hvdd-no-such-program': No such file or directory");

  absl::StatusOr<pid_t> by_path =
      Start(*launcher, Spec({"/nonexistent/hvdd-program"}), recorder.Callbacks());
  CHECK(by_path.status().code() == absl::StatusCode::kNotFound);
  CHECK(by_path.status().message() ==
        "cannot execute '/nonexistent/hvdd-program': No such file or directory");

  CHECK(launcher->running() == 0);
  launcher.reset();
  CHECK(recorder.exit_calls() == 0);
  CHECK(recorder.Lines(OutputStream::kStdout).empty());
}

TEST_CASE("Launcher fails clearly when the program is not executable", "[launcher]") {
  char file_template[] = "/tmp/hvdd-launcher-noexec-XXXXXX";
  const int fd = mkstemp(file_template);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "#!/bin/sh\n", 10) == 10);
  close(fd);
  REQUIRE(chmod(file_template, 0644) == 0);
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  absl::StatusOr<pid_t> pid = Start(*launcher, Spec({file_template}), recorder.Callbacks());
  CHECK(pid.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(pid.status().message() ==
        absl::StrCat("cannot execute '", file_template, "': Permission denied"));
  unlink(file_template);
}

TEST_CASE("Launcher fails clearly when the working directory is missing", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  LaunchSpec spec = Spec({"true"});
  spec.working_dir = "/nonexistent/hvdd-workdir";
  absl::StatusOr<pid_t> pid = Start(*launcher, spec, recorder.Callbacks());
  CHECK(pid.status().code() == absl::StatusCode::kNotFound);
  CHECK(pid.status().message() ==
        "cannot change to working directory '/nonexistent/hvdd-workdir' to run 'true': "
        "No such file or directory");
  CHECK(launcher->running() == 0);
}

TEST_CASE("Launcher rejects a spec it cannot execute", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  absl::StatusOr<pid_t> empty = Start(*launcher, Spec({}), recorder.Callbacks());
  CHECK(empty.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(empty.status().message() == "argv is empty: nothing to execute");

  LaunchSpec bad_env = Spec({"true"});
  bad_env.env["A=B"] = "1";
  absl::StatusOr<pid_t> env = Start(*launcher, bad_env, recorder.Callbacks());
  CHECK(env.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(env.status().message()), Catch::Contains("'A=B'"));
}

TEST_CASE("Launcher Signal reaches the process group, grandchildren included", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  // The shell survives SIGTERM (it only prints), its background sleep does not:
  // so the sleep can only die from the group signal, not from the shell's exit.
  const pid_t pid = LaunchOk(
      *launcher, Shell("trap 'echo term' TERM; sleep 1000 & echo $!; wait; exec sleep 1000"),
      recorder);
  const pid_t grandchild = std::stoi(recorder.AwaitLines(1)[0]);
  // Until it execs, the forked shell still has the trap and would swallow SIGTERM.
  REQUIRE(WaitUntil([&] { return Command(grandchild) == "sleep"; }));

  REQUIRE(launcher->Signal(pid, SIGTERM).ok());
  CHECK(WaitUntil([&] { return !IsAlive(grandchild); }));
  CHECK(recorder.AwaitLines(2)[1] == "term");
  CHECK(launcher->Signal(pid, 0).ok());  // the shell itself still runs
  CHECK(recorder.exit_calls() == 0);

  REQUIRE(launcher->Signal(pid, SIGKILL).ok());
  CHECK(recorder.AwaitExit().signal == SIGKILL);
}

TEST_CASE("Launcher Signal returns NOT_FOUND for pids it does not run", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  CHECK(launcher->Signal(getpid(), 0).code() == absl::StatusCode::kNotFound);
  const pid_t pid = LaunchOk(*launcher, Spec({"true"}), recorder);
  recorder.AwaitExit();
  const absl::Status reaped = launcher->Signal(pid, SIGTERM);
  CHECK(reaped.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(reaped.message()), Catch::Contains(std::to_string(pid)));
}

TEST_CASE("Launcher kills what is left of a process group when its leader exits", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  LaunchOk(*launcher, Shell("sleep 1000 & echo $!"), recorder);
  const pid_t grandchild = std::stoi(recorder.AwaitLines(1)[0]);
  CHECK(recorder.AwaitExit().success());
  CHECK(WaitUntil([&] { return !IsAlive(grandchild); }));
}

// A shell that starts `command` in a new session (out of the process group,
// so it survives the shell's exit and keeps its stdout), waits until it has
// left, prints its pid to stderr and exits.
LaunchSpec EscapingShell(const std::string& command) {
  return Shell(absl::StrCat(
      "setsid ", command, " & ",
      "until [ \"$(cut -d' ' -f6 /proc/$!/stat)\" = $! ]; do sleep 0.01; done; ", "echo $! >&2"));
}

TEST_CASE("Launcher reports the exit even when an escaped descendant keeps the pipes",
          "[launcher]") {
  ProcessRecorder recorder;
  LocalLauncherOptions options;
  options.output_linger = absl::Milliseconds(200);
  auto launcher = MakeLauncher(options);
  LaunchOk(*launcher, EscapingShell("sleep 1000"), recorder);
  const pid_t escaped = std::stoi(recorder.AwaitLines(1, OutputStream::kStderr)[0]);
  KillOnExit cleanup{escaped};
  CHECK(recorder.AwaitExit().success());
  CHECK(IsAlive(escaped));  // so the pipe really was still open
  CHECK(launcher->running() == 0);
}

TEST_CASE("Launcher reports the exit even when an escaped descendant keeps writing", "[launcher]") {
  ProcessRecorder recorder;
  LocalLauncherOptions options;
  options.output_linger = absl::Milliseconds(200);
  auto launcher = MakeLauncher(options);
  // Keep stderr only: storing the flood of "y" would slow the test down.
  ProcessCallbacks callbacks = recorder.Callbacks();
  callbacks.on_line = [record = callbacks.on_line](OutputStream stream, std::string_view line) {
    if (stream == OutputStream::kStderr) record(stream, line);
  };
  REQUIRE(Start(*launcher, EscapingShell("yes"), std::move(callbacks)).ok());
  CHECK(recorder.AwaitExit().success());
  CHECK_FALSE(recorder.line_after_exit());
  const std::vector<std::string> lines = recorder.Lines(OutputStream::kStderr);
  REQUIRE(lines.size() == 1);
  const pid_t writer = std::stoi(lines[0]);
  // With the pipe closed, its next write raises SIGPIPE: nothing keeps spinning.
  const bool writer_died = WaitUntil([&] { return !IsAlive(writer); });
  if (!writer_died) kill(writer, SIGKILL);
  CHECK(writer_died);
}

TEST_CASE("Launcher destructor leaves no child or grandchild alive", "[launcher]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  const pid_t pid = LaunchOk(*launcher, Shell("sleep 1000 & echo $!; wait"), recorder);
  const pid_t grandchild = std::stoi(recorder.AwaitLines(1)[0]);
  REQUIRE(IsAlive(pid));
  REQUIRE(IsAlive(grandchild));

  launcher.reset();
  CHECK(recorder.exit_calls() == 1);
  CHECK(recorder.AwaitExit().signal == SIGKILL);
  CHECK_FALSE(IsAlive(pid));  // reaped: gone at once
  CHECK(WaitUntil([&] { return !IsAlive(grandchild); }));
}

TEST_CASE("Launcher reports 20 concurrent children exactly once each", "[launcher]") {
  constexpr int kChildren = 20;
  constexpr int kThreads = 4;
  std::vector<ProcessRecorder> recorders(kChildren);
  auto launcher = MakeLauncher();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kChildren; i += kThreads) {
        const absl::StatusOr<pid_t> pid =
            Start(*launcher, Shell(absl::StrCat("echo child-", i, "; exit ", i)),
                  recorders[i].Callbacks());
        CHECK(pid.ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kChildren; ++i) {
    CHECK(recorders[i].AwaitExit().exit_code == i);
    CHECK(recorders[i].Lines(OutputStream::kStdout) ==
          std::vector<std::string>{absl::StrCat("child-", i)});
  }
  CHECK(launcher->running() == 0);
  launcher.reset();
  for (int i = 0; i < kChildren; ++i) CHECK(recorders[i].exit_calls() == 1);
}

TEST_CASE("Launcher TerminateAll sends SIGTERM, then SIGKILL after the grace", "[launcher]") {
  ProcessRecorder polite, stubborn;
  auto launcher = MakeLauncher();
  LaunchOk(*launcher, Spec({"sleep", "1000"}), polite);
  LaunchOk(*launcher, Shell("trap '' TERM; echo ready; exec sleep 1000"), stubborn);
  stubborn.AwaitLines(1);  // SIGTERM is ignored from here on

  launcher->TerminateAll(absl::Milliseconds(300));
  CHECK(launcher->running() == 0);
  CHECK(polite.exit_calls() == 1);
  CHECK(stubborn.exit_calls() == 1);
  CHECK(polite.AwaitExit().signal == SIGTERM);
  CHECK(stubborn.AwaitExit().signal == SIGKILL);
}

TEST_CASE("Launcher accepts a launch from inside on_exit", "[launcher]") {
  ProcessRecorder second;
  absl::Mutex mu;
  std::optional<absl::StatusOr<pid_t>> relaunched;
  auto launcher = MakeLauncher();
  ProcessCallbacks first;
  first.on_exit = [&](const ExitInfo&) {
    absl::StatusOr<pid_t> pid = Start(*launcher, Shell("echo again"), second.Callbacks());
    absl::MutexLock lock(&mu);
    relaunched = pid;
  };
  REQUIRE(Start(*launcher, Spec({"true"}), std::move(first)).ok());
  CHECK(second.AwaitExit().success());
  CHECK(second.Lines(OutputStream::kStdout) == std::vector<std::string>{"again"});
  absl::MutexLock lock(&mu);
  REQUIRE(relaunched.has_value());
  CHECK(relaunched->ok());
}

TEST_CASE("Launcher gives children /dev/null stdin and no stray descriptors", "[launcher]") {
  // A descriptor the test leaks on purpose (no close-on-exec), far from dash's own.
  const int leaked = fcntl(STDERR_FILENO, F_DUPFD, 200);
  REQUIRE(leaked >= 200);
  ProcessRecorder recorder;
  {
    auto launcher = MakeLauncher();
    LaunchOk(*launcher,
             Shell(absl::StrCat("readlink /proc/$$/fd/0; "
                                "if [ -e /proc/$$/fd/",
                                leaked,
                                " ]; then echo leaked; "
                                "else echo closed; fi")),
             recorder);
    CHECK(recorder.AwaitExit().success());
  }
  close(leaked);
  CHECK(recorder.Lines(OutputStream::kStdout) == std::vector<std::string>{"/dev/null", "closed"});
}

TEST_CASE("Launcher starts children with no blocked or ignored signals", "[launcher]") {
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(sigaction(SIGPIPE, &ignore, &previous) == 0);  // as network daemons do
  ProcessRecorder recorder;
  {
    auto launcher = MakeLauncher();
    LaunchOk(*launcher, Spec({"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}), recorder);
    CHECK(recorder.AwaitExit().success());
  }
  sigaction(SIGPIPE, &previous, nullptr);
  CHECK(recorder.Lines(OutputStream::kStdout) ==
        std::vector<std::string>{"SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000"});
}

}  // namespace
}  // namespace horovodd::daemon
