// Running real discovery scripts (written to a temp dir), and the host sources built on them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "discovery/host_source.h"
#include "discovery/script_runner.h"
#include "temp_dir.h"

namespace horovodd::discovery {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

// Generous: the machine is small and busy. Only "did not hang" bounds, never asserted times.
const absl::Duration kGenerousTimeout = absl::Seconds(30);

// A test's directory, with the scripts and files the cases write into it.
class TempDir : public hvdd_test::TempDir {
 public:
  TempDir() : hvdd_test::TempDir("hvdd-discovery") {}

  // Writes `body` under a "#!/bin/sh" line and returns the file's path.
  std::string WriteScript(const std::string& name, const std::string& body,
                          mode_t mode = 0755) const {
    return WriteFile(name, "#!/bin/sh\n" + body, mode);
  }
  std::string WriteFile(const std::string& name, const std::string& contents,
                        mode_t mode = 0644) const {
    const fs::path file = path() / name;
    {
      std::ofstream out(file, std::ios::binary);
      out << contents;
      REQUIRE(out.good());
    }
    REQUIRE(chmod(file.c_str(), mode) == 0);
    return file.string();
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(path() / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

// Runs in `dir` for one scope; the test binary is single-threaded.
class ChdirGuard {
 public:
  explicit ChdirGuard(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ChdirGuard() {
    std::error_code ignored;
    fs::current_path(old_, ignored);
  }

 private:
  fs::path old_;
};

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

// Dead: no /proc entry, or a zombie waiting for init (the test is not its parent).
bool ProcessIsGone(pid_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat_file) return true;
  const std::string stat(std::istreambuf_iterator<char>(stat_file), {});
  const size_t name_end = stat.rfind(')');  // the state follows the command name
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'Z';
}

bool WaitUntilGone(pid_t pid) {
  const absl::Time deadline = absl::Now() + kGenerousTimeout;
  while (!ProcessIsGone(pid)) {
    if (absl::Now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

pid_t ReadPid(const TempDir& dir, const std::string& name) {
  const std::string text = dir.Read(name);
  INFO("pid file " << name << " holds \"" << text << "\"");
  REQUIRE(!text.empty());
  return static_cast<pid_t>(std::stol(text));
}

TEST_CASE("a script's stdout is returned as printed", "[script]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("discover.sh", "echo '# from the inventory'\necho b:2\necho a\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.ok());
  CHECK(*output == "# from the inventory\nb:2\na\n");
}

TEST_CASE("a failing script reports its exit status and last stderr line", "[script]") {
  TempDir dir;
  const std::string script = dir.WriteScript(
      "discover.sh",
      "echo a:1\necho 'querying inventory' >&2\necho 'cannot reach the inventory service' >&2\n"
      "exit 3\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(MessageOf(output.status()),
             Equals("discovery script " + script +
                    ": exited with status 3: cannot reach the inventory service"));
}

TEST_CASE("a script killed by a signal says which", "[script]") {
  TempDir dir;
  const std::string script = dir.WriteScript("discover.sh", "kill -9 $$\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(MessageOf(output.status()),
             Equals("discovery script " + script + ": killed by signal 9 (SIGKILL)"));
}

TEST_CASE("a hanging script is killed at the timeout, with its children", "[script]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("discover.sh", "echo $$ > " + (dir.path() / "script.pid").string() +
                                         "\nsleep 1000 &\necho $! > " +
                                         (dir.path() / "sleep.pid").string() + "\nwait\n");
  const auto output = RunDiscoveryScript(script, absl::Seconds(1));
  REQUIRE(output.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(MessageOf(output.status()),
             Equals("discovery script " + script + ": timed out after 1s"));

  // The script itself was reaped by the runner (not even a zombie is left)...
  const pid_t script_pid = ReadPid(dir, "script.pid");
  CHECK_FALSE(fs::exists("/proc/" + std::to_string(script_pid)));
  // ...and the sleep it started died with it.
  CHECK(WaitUntilGone(ReadPid(dir, "sleep.pid")));
}

TEST_CASE("a script that closes its output and hangs still times out", "[script]") {
  TempDir dir;
  const std::string script = dir.WriteScript("discover.sh", "exec >&- 2>&-\nsleep 1000\n");
  const auto output = RunDiscoveryScript(script, absl::Seconds(1));
  REQUIRE(output.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(MessageOf(output.status()), Contains("timed out after 1s"));
}

TEST_CASE("what a successful script leaves running is killed", "[script]") {
  TempDir dir;
  const std::string script =
      dir.WriteScript("discover.sh", "sleep 1000 &\necho $! > " +
                                         (dir.path() / "sleep.pid").string() + "\necho a:1\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.ok());
  CHECK(*output == "a:1\n");
  CHECK(WaitUntilGone(ReadPid(dir, "sleep.pid")));
}

TEST_CASE("a process escaping the script's group cannot make it hang", "[script]") {
  TempDir dir;
  const std::string pid_file = (dir.path() / "escaped.pid").string();
  const std::string script =
      dir.WriteScript("discover.sh", "setsid sh -c 'echo $$ > " + pid_file +
                                         "; exec sleep 1000' &\n"
                                         "while [ ! -s " +
                                         pid_file + " ]; do sleep 0.01; done\necho a:1\n");
  // Long enough for the script itself to finish on a busy machine.
  const auto output = RunDiscoveryScript(script, absl::Seconds(3));
  const pid_t escaped = ReadPid(dir, "escaped.pid");
  kill(escaped, SIGKILL);  // in its own session, out of the runner's reach: ours to clean up
  REQUIRE(output.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(MessageOf(output.status()),
             Contains("exited, but a process it started outside its process group kept its "
                      "stdout or stderr open past the 3s timeout"));
  CHECK(WaitUntilGone(escaped));
}

TEST_CASE("a missing script", "[script]") {
  TempDir dir;
  const std::string script = (dir.path() / "no-such-script.sh").string();
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(MessageOf(output.status()), Equals("discovery script " + script + ": not found"));
}

TEST_CASE("a script that is not executable", "[script]") {
  TempDir dir;
  SECTION("no execute permission") {
    const std::string script = dir.WriteScript("discover.sh", "echo a:1\n", 0644);
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    REQUIRE(output.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(MessageOf(output.status()),
               Equals("discovery script " + script + ": not executable"));
  }
  SECTION("a directory") {
    const auto output = RunDiscoveryScript(dir.path().string(), kGenerousTimeout);
    REQUIRE(output.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(MessageOf(output.status()), Contains("not executable (it is a directory)"));
  }
  SECTION("no #! line is never handed to a shell") {
    const std::string script = dir.WriteFile("discover.sh", "echo a:1\n", 0755);
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    REQUIRE(output.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(MessageOf(output.status()), Contains("a script needs a #! line"));
  }
  SECTION("a missing interpreter") {
    const std::string script =
        dir.WriteFile("discover.sh", "#!/no/such/interpreter\necho a:1\n", 0755);
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    REQUIRE(output.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(MessageOf(output.status()), Contains("#! interpreter is missing"));
  }
}

TEST_CASE("endless output is cut off at 1 MiB", "[script]") {
  TempDir dir;
  const std::string script = dir.WriteScript("discover.sh", "yes a:1\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(MessageOf(output.status()),
             Equals("discovery script " + script + ": printed more than 1048576 bytes on stdout"));
}

TEST_CASE("output larger than a pipe buffer is read whole", "[script]") {
  TempDir dir;
  // About 400 KiB on stdout and 200 KiB on stderr, interleaved.
  const std::string script = dir.WriteScript(
      "discover.sh",
      "i=0\nwhile [ $i -lt 30000 ]; do echo host-$i:1; echo noise-$i >&2; i=$((i+1)); done\n");
  const auto output = RunDiscoveryScript(script, kGenerousTimeout);
  REQUIRE(output.ok());
  CHECK(std::count(output->begin(), output->end(), '\n') == 30000);
  CHECK_THAT(*output, Contains("host-0:1\n") && Contains("host-29999:1\n"));
}

TEST_CASE("a path with spaces and ';' is run as a path, never through a shell", "[script]") {
  TempDir dir;
  dir.WriteScript("run me; touch injected", "echo a:1\n");
  ChdirGuard in_dir(dir.path());
  const auto output = RunDiscoveryScript("./run me; touch injected", kGenerousTimeout);
  REQUIRE(output.ok());
  CHECK(*output == "a:1\n");
  CHECK_FALSE(fs::exists(dir.path() / "injected"));
}

TEST_CASE("the script gets a clean process", "[script]") {
  TempDir dir;
  SECTION("stdin is empty, not the daemon's") {
    const std::string script = dir.WriteScript("discover.sh", "cat\necho a:1\n");
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    REQUIRE(output.ok());
    CHECK(*output == "a:1\n");
  }
  SECTION("no descriptor of ours leaks into it") {
    const std::string marker = dir.WriteFile("leak-marker", "");
    const int fd = open(marker.c_str(), O_RDONLY);  // deliberately not close-on-exec
    REQUIRE(fd >= 0);
    const std::string script = dir.WriteScript("discover.sh", "ls -l /proc/$$/fd/\n");
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    close(fd);
    REQUIRE(output.ok());
    CHECK_THAT(*output, !Contains("leak-marker"));
  }
  SECTION("signals we block are unblocked for it") {
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    REQUIRE(pthread_sigmask(SIG_BLOCK, &term, &old) == 0);
    const std::string script = dir.WriteScript("discover.sh", "kill -TERM $$\necho a:1\n");
    const auto output = RunDiscoveryScript(script, kGenerousTimeout);
    REQUIRE(pthread_sigmask(SIG_SETMASK, &old, nullptr) == 0);
    REQUIRE(output.status().code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(MessageOf(output.status()), Contains("killed by signal 15 (SIGTERM)"));
  }
}

TEST_CASE("scripts run from several threads at once get their own output", "[script]") {
  TempDir dir;
  constexpr int kThreads = 4;
  std::vector<std::string> scripts;
  for (int i = 0; i < kThreads; ++i) {
    scripts.push_back(dir.WriteScript("discover-" + std::to_string(i) + ".sh",
                                      "echo host-" + std::to_string(i) + ":1\n"));
  }
  std::vector<absl::StatusOr<std::string>> outputs(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Several rounds, stopping at the first wrong answer so the check below sees it.
      for (int round = 0; round < 10; ++round) {
        outputs[i] = RunDiscoveryScript(scripts[i], kGenerousTimeout);
        if (!outputs[i].ok() || *outputs[i] != "host-" + std::to_string(i) + ":1\n") break;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO(outputs[i].status().ToString());
    REQUIRE(outputs[i].ok());
    CHECK(*outputs[i] == "host-" + std::to_string(i) + ":1\n");
  }
}

TEST_CASE("a timeout must be positive", "[script]") {
  const auto output = RunDiscoveryScript("/bin/true", absl::ZeroDuration());
  REQUIRE(output.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(MessageOf(output.status()), Contains("timeout 0 is not positive"));
}

TEST_CASE("a script host source parses what the script prints", "[source]") {
  TempDir dir;
  SECTION("good output") {
    const std::string script =
        dir.WriteScript("discover.sh", "echo 'node-b:4'\necho '# down: node-c'\necho node-a\n");
    auto source = MakeScriptHostSource(script, 2, kGenerousTimeout);
    CHECK(source->Describe() == "script " + script);
    const auto hosts = source->Discover();
    REQUIRE(hosts.ok());
    CHECK(*hosts == HostSet{{"node-b", 4}, {"node-a", 2}});  // in the order printed
  }
  SECTION("malformed output names the script and the line") {
    const std::string script =
        dir.WriteScript("discover.sh", "echo node-a:2\necho 'oops this is not a host'\n");
    const auto hosts = MakeScriptHostSource(script, 1, kGenerousTimeout)->Discover();
    REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(MessageOf(hosts.status()), Contains("discovery script " + script +
                                                   " printed bad output: line 2 "
                                                   "\"oops this is not a host\""));
  }
  SECTION("a failing script keeps its error") {
    const std::string script = dir.WriteScript("discover.sh", "echo 'no quota' >&2\nexit 1\n");
    const auto hosts = MakeScriptHostSource(script, 1, kGenerousTimeout)->Discover();
    REQUIRE(hosts.status().code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(MessageOf(hosts.status()), Contains("exited with status 1: no quota"));
  }
}

}  // namespace
}  // namespace horovodd::discovery
