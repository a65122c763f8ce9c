// The SSH launcher against a real, private sshd on 127.0.0.2/127.0.0.3
// (tests/integration/sshd.py starts it, with its own host and user keys).
// The "remote" processes run on this machine, so the tests can look at them
// by pid: that they are gone, stopped, or still there.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/launch/ssh/daemon_tunnel.h"
#include "daemon/launch/ssh/ssh_launcher.h"
#include "process_recorder.h"

namespace horovodd::daemon {
namespace {

using testing::ProcessRecorder;

// "Did not hang" deadline: generous, the test machine is small and loaded.
constexpr absl::Duration kPatience = absl::Seconds(60);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Running (a zombie counts as gone: nobody may reap it in a container).
bool Alive(int pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(") ");
  return paren != std::string::npos && stat[paren + 2] != 'Z';
}

int ParentOf(int pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(") ");
  REQUIRE(paren != std::string::npos);
  std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 2), ' ');
  int ppid = 0;
  REQUIRE(absl::SimpleAtoi(fields.at(1), &ppid));
  return ppid;
}

bool WaitGone(int pid) {
  const absl::Time deadline = absl::Now() + kPatience;
  while (Alive(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// The private sshd, started once for this executable by sshd.py, which serves
// until its stdin closes (at exit) and then kills sshd and all it started.
class TestSshd {
 public:
  static TestSshd& Get() {
    static TestSshd* sshd = new TestSshd();  // stopped by the atexit handler below
    return *sshd;
  }

  int port = 0;
  std::string dir;
  std::string identity;

  SshOptions Options(const std::string& known_hosts_name = "known_hosts") const {
    SshOptions options;
    options.port = port;
    options.identity_file = identity;
    options.known_hosts_file = absl::StrCat(dir, "/", known_hosts_name);
    return options;
  }
  std::string HostKeyLine(const std::string& address) const {
    std::vector<std::string> key =
        absl::StrSplit(ReadFile(dir + "/host_ed25519.pub"), ' ', absl::SkipEmpty());
    return absl::StrCat("[", address, "]:", port, " ", key.at(0), " ", key.at(1), "\n");
  }

 private:
  TestSshd() {
    std::string pattern = "/tmp/hvdd_sshd_XXXXXX";
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    base_ = pattern;
    dir = base_ + "/sshd";
    const std::string info = base_ + "/info.json";
    server_ = popen(absl::StrCat("python3 " HVDD_SOURCE_DIR "/tests/integration/sshd.py '", dir,
                                 "' > '", info, "'")
                        .c_str(),
                    "w");
    REQUIRE(server_ != nullptr);
    std::atexit([] {
      pclose(Get().server_);  // sshd.py stops sshd when its stdin closes
      std::error_code ignored;
      std::filesystem::remove_all(Get().base_, ignored);
    });
    const absl::Time deadline = absl::Now() + kPatience;
    std::string json;
    while ((json = ReadFile(info)).find('\n') == std::string::npos) {
      REQUIRE(absl::Now() < deadline);
      absl::SleepFor(absl::Milliseconds(20));
    }
    // {"port": 40123, ...}
    const size_t at = json.find("\"port\": ");
    REQUIRE(at != std::string::npos);
    REQUIRE(absl::SimpleAtoi(json.substr(at + 8, json.find(',', at) - at - 8), &port));
    identity = dir + "/id_ed25519";
  }

  std::string base_;  // everything of this server, removed at exit
  FILE* server_ = nullptr;
};

// The SSH options of `launch`, to change: its route gets a copy of its own.
SshOptions& SshOf(WorkerLaunch& launch) {
  auto options = std::make_shared<SshOptions>(SshOptionsIn(launch.route));
  SshOptions& changeable = *options;
  launch.route.options = std::move(options);
  return changeable;
}

WorkerLaunch Shell(const std::string& script, const std::string& host = "127.0.0.2") {
  WorkerLaunch launch;
  launch.host = host;
  SshOf(launch) = TestSshd::Get().Options();
  launch.spec.argv = {"/bin/sh", "-c", script};
  launch.spec.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "it's a \"test\" $HOME"}};
  launch.spec.working_dir = "/tmp";
  return launch;
}

std::unique_ptr<SshLauncher> MakeLauncher(SshLauncherOptions options = {}) {
  absl::StatusOr<std::unique_ptr<SshLauncher>> launcher = SshLauncher::Create(options);
  REQUIRE(launcher.ok());
  return *std::move(launcher);
}

TEST_CASE("SshLauncher runs a command on a host: output, exit status, pid", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  absl::StatusOr<LaunchedProcess> launched = launcher->Launch(
      Shell("echo pid=$$; echo \"$GREETING\"; pwd; echo oops >&2; printf 'no newline'; exit 3"),
      recorder.Callbacks());
  REQUIRE(launched.ok());
  CHECK(launched->handle != 0);
  const ExitInfo exit = recorder.AwaitExit();
  CHECK(exit.exit_code == 3);
  CHECK(exit.signal == 0);
  CHECK(recorder.Lines(OutputStream::kStdout) ==
        std::vector<std::string>{absl::StrCat("pid=", launched->pid), "it's a \"test\" $HOME",
                                 "/tmp", "no newline"});
  CHECK(recorder.Lines(OutputStream::kStderr) == std::vector<std::string>{"oops"});
  CHECK_FALSE(recorder.line_after_exit());
  CHECK(launcher->Signal(launched->handle, SIGTERM).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("SshLauncher delivers large output whole and in order", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  REQUIRE(launcher->Launch(Shell("seq 1 200000; seq 1 50000 >&2"), recorder.Callbacks()).ok());
  CHECK(recorder.AwaitExit().success());
  const std::vector<std::string> out = recorder.Lines(OutputStream::kStdout);
  REQUIRE(out.size() == 200000);
  CHECK(out.front() == "1");
  CHECK(out[12345] == "12346");
  CHECK(out.back() == "200000");
  CHECK(recorder.Lines(OutputStream::kStderr).size() == 50000);
}

TEST_CASE("SshLauncher signals reach the whole remote process group", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  absl::StatusOr<LaunchedProcess> launched =
      launcher->Launch(Shell("sleep 300 & echo child=$!; wait"), recorder.Callbacks());
  REQUIRE(launched.ok());
  const std::string line = recorder.AwaitLines(1).at(0);
  int child = 0;
  REQUIRE(absl::SimpleAtoi(line.substr(6), &child));
  CHECK(Alive(launched->pid));
  REQUIRE(launcher->Signal(launched->handle, SIGTERM).ok());
  const ExitInfo exit = recorder.AwaitExit();
  CHECK(exit.signal == SIGTERM);
  CHECK(WaitGone(child));
  CHECK(WaitGone(launched->pid));
}

TEST_CASE("SshLauncher kills what an exited process left holding its output", "[ssh]") {
  ProcessRecorder recorder;
  SshLauncherOptions options;
  options.output_linger = absl::Milliseconds(300);
  auto launcher = MakeLauncher(options);
  REQUIRE(launcher->Launch(Shell("sleep 300 & echo child=$!; exit 0"), recorder.Callbacks()).ok());
  int child = 0;
  REQUIRE(absl::SimpleAtoi(recorder.AwaitLines(1).at(0).substr(6), &child));
  CHECK(recorder.AwaitExit().success());
  CHECK(WaitGone(child));
}

TEST_CASE("SshLauncher: a failed start names the host and the reason", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  const TestSshd& sshd = TestSshd::Get();

  SECTION("nothing listening") {
    absl::Status status =
        launcher->Launch(Shell("true", "127.0.0.4"), recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(status.message()), Catch::Contains("127.0.0.4"));
    CHECK_THAT(std::string(status.message()), Catch::Contains("refused"));
  }
  SECTION("a changed host key, strict") {
    const std::string known_hosts = sshd.dir + "/wrong_known_hosts";
    // Some other key (the user key's public half) recorded for 127.0.0.3.
    std::vector<std::string> wrong =
        absl::StrSplit(ReadFile(sshd.identity + ".pub"), ' ', absl::SkipEmpty());
    std::ofstream(known_hosts) << "[127.0.0.3]:" << sshd.port << " " << wrong.at(0) << " "
                               << wrong.at(1) << "\n";
    WorkerLaunch launch = Shell("touch /tmp/hvdd-must-not-run", "127.0.0.3");
    SshOf(launch).known_hosts_file = known_hosts;
    SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kStrict;
    absl::Status status = launcher->Launch(launch, recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(status.message()), Catch::Contains("127.0.0.3"));
    CHECK_THAT(std::string(status.message()), Catch::Contains(known_hosts));
    CHECK_THAT(std::string(status.message()), Catch::Contains("does not match"));
    // accept-new refuses a changed key just the same.
    SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kAcceptNew;
    CHECK(launcher->Launch(launch, recorder.Callbacks()).status().code() ==
          absl::StatusCode::kPermissionDenied);
  }
  SECTION("an unknown host key: strict refuses, accept-new records it") {
    WorkerLaunch launch = Shell("true");
    SshOf(launch).known_hosts_file = sshd.dir + "/fresh_known_hosts";
    SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kStrict;
    absl::Status status = launcher->Launch(launch, recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(status.message()), Catch::Contains("strict"));
    SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kAcceptNew;
    REQUIRE(launcher->Launch(launch, recorder.Callbacks()).ok());
    CHECK(recorder.AwaitExit().success());
    CHECK_THAT(ReadFile(SshOptionsIn(launch.route).known_hosts_file),
               Catch::Contains(absl::StrCat("127.0.0.2]:", sshd.port)));
    SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kStrict;
    ProcessRecorder known;
    CHECK(launcher->Launch(launch, known.Callbacks()).ok());
    CHECK(known.AwaitExit().success());
  }
  SECTION("accept-new from sessions starting at once records the key once") {
    // Workers start on a new host together: each session finds the key missing.
    constexpr int kSessions = 8;
    const std::string known_hosts = sshd.dir + "/shared_known_hosts";
    std::vector<ProcessRecorder> recorders(kSessions);
    std::vector<absl::Status> started(kSessions);
    std::vector<std::thread> threads;
    for (int i = 0; i < kSessions; ++i) {
      threads.emplace_back([&, i] {
        WorkerLaunch launch = Shell("true");
        SshOf(launch).known_hosts_file = known_hosts;
        SshOf(launch).host_key_checking = SshOptions::HostKeyChecking::kAcceptNew;
        started[i] = launcher->Launch(launch, recorders[i].Callbacks()).status();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int i = 0; i < kSessions; ++i) {
      REQUIRE(started[i].ok());
      CHECK(recorders[i].AwaitExit().success());
    }
    const std::string entry = absl::StrCat("[127.0.0.2]:", sshd.port, " ");
    const std::string text = ReadFile(known_hosts);
    size_t entries = 0;
    for (size_t at = text.find(entry); at != std::string::npos; at = text.find(entry, at + 1)) {
      ++entries;
    }
    CHECK(entries == 1);
  }
  SECTION("a key the host does not accept") {
    const std::string other_key = sshd.dir + "/other_key";
    REQUIRE(std::system(absl::StrCat("rm -f ", other_key, "*; ssh-keygen -q -t ed25519 -N '' -f ",
                                     other_key, " </dev/null")
                            .c_str()) == 0);
    WorkerLaunch launch = Shell("true");
    SshOf(launch).identity_file = other_key;
    SshOf(launch).user = "root";
    absl::Status status = launcher->Launch(launch, recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(status.message()), Catch::Contains("127.0.0.2"));
    CHECK_THAT(std::string(status.message()), Catch::Contains("'root'"));
    SshOf(launch).identity_file = sshd.dir + "/no_such_key";
    status = launcher->Launch(launch, recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(status.message()), Catch::Contains("no_such_key"));
  }
  SECTION("a working directory that does not exist there") {
    WorkerLaunch launch = Shell("true");
    launch.spec.working_dir = "/no/such/dir";
    absl::Status status = launcher->Launch(launch, recorder.Callbacks()).status();
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(status.message()), Catch::Contains("/no/such/dir"));
    CHECK_THAT(std::string(status.message()), Catch::Contains("127.0.0.2"));
  }
  CHECK(recorder.exit_calls() <= 1);  // only the one accept-new run
}

TEST_CASE("SshLauncher gives up on a SIGKILL a silent host never confirms", "[ssh]") {
  ProcessRecorder recorder;
  SshLauncherOptions options;
  options.kill_timeout = absl::Seconds(1);
  auto launcher = MakeLauncher(options);
  absl::StatusOr<LaunchedProcess> launched =
      launcher->Launch(Shell("echo started; exec sleep 300"), recorder.Callbacks());
  REQUIRE(launched.ok());
  recorder.AwaitLines(1);
  // The sshd process serving this session stops: the host goes silent.
  const int session_sshd = ParentOf(launched->pid);
  REQUIRE(kill(session_sshd, SIGSTOP) == 0);
  REQUIRE(launcher->Signal(launched->handle, SIGKILL).ok());
  const ExitInfo exit = recorder.AwaitExit();
  kill(session_sshd, SIGCONT);
  kill(launched->pid, SIGKILL);  // cut off from it; a real worker ends itself
  CHECK(exit.exit_code == -1);
  const std::vector<std::string> errors = recorder.Lines(OutputStream::kStderr);
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors.back(), Catch::Contains("no answer from 127.0.0.2"));
}

TEST_CASE("SshLauncher reports a broken connection as the process's end", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  absl::StatusOr<LaunchedProcess> launched =
      launcher->Launch(Shell("echo started; exec sleep 300"), recorder.Callbacks());
  REQUIRE(launched.ok());
  recorder.AwaitLines(1);
  REQUIRE(kill(ParentOf(launched->pid), SIGKILL) == 0);
  const ExitInfo exit = recorder.AwaitExit();
  kill(launched->pid, SIGKILL);  // orphaned here; a real worker ends itself
  CHECK(exit.exit_code == -1);
  const std::vector<std::string> errors = recorder.Lines(OutputStream::kStderr);
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors.back(), Catch::Contains("127.0.0.2"));
}

TEST_CASE("SshLauncher: destruction and TerminateAll leave nothing running", "[ssh]") {
  ProcessRecorder first, second;
  int first_pid = 0, second_pid = 0;
  {
    auto launcher = MakeLauncher();
    absl::StatusOr<LaunchedProcess> a =
        launcher->Launch(Shell("trap '' TERM; echo up; exec sleep 300"), first.Callbacks());
    absl::StatusOr<LaunchedProcess> b =
        launcher->Launch(Shell("echo up; exec sleep 300", "127.0.0.3"), second.Callbacks());
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    first_pid = a->pid;
    second_pid = b->pid;
    first.AwaitLines(1);
    second.AwaitLines(1);
    SECTION("TerminateAll: SIGTERM, then SIGKILL for who ignores it") {
      launcher->TerminateAll(absl::Milliseconds(500));
      CHECK(first.exit_calls() == 1);
      CHECK(second.exit_calls() == 1);
      CHECK(second.AwaitExit().signal == SIGTERM);
      CHECK(first.AwaitExit().signal == SIGKILL);
    }
    SECTION("the destructor: SIGKILL") {}
  }
  CHECK(first.exit_calls() == 1);
  CHECK(second.exit_calls() == 1);
  CHECK(WaitGone(first_pid));
  CHECK(WaitGone(second_pid));
}

// A stand-in for a daemon on 127.0.0.1: takes one connection, reads it to
// the end checking every byte against Pattern, then answers `answer_bytes`
// of Pattern and closes.
class LoopbackSink {
 public:
  explicit LoopbackSink(size_t answer_bytes) : answer_bytes_(answer_bytes) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_, 4) == 0);
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackSink() {
    shutdown(listener_, SHUT_RDWR);  // ends a wait in accept
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  // Once the connection ended: bytes read, and whether all were Pattern.
  std::pair<size_t, bool> Received() {
    thread_.join();
    thread_ = std::thread([] {});
    return {received_, intact_};
  }
  static char Pattern(size_t i) { return static_cast<char>(i % 251); }

 private:
  void Serve() {
    const int fd = accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    char buffer[1 << 16];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
      for (ssize_t i = 0; i < n; ++i) intact_ = intact_ && buffer[i] == Pattern(received_ + i);
      received_ += static_cast<size_t>(n);
    }
    std::string answer(answer_bytes_, '\0');
    for (size_t i = 0; i < answer.size(); ++i) answer[i] = Pattern(i);
    for (size_t sent = 0; sent < answer.size();) {
      const ssize_t n = write(fd, answer.data() + sent, answer.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    close(fd);
  }

  const size_t answer_bytes_;
  int listener_ = -1;
  int port_ = 0;
  size_t received_ = 0;  // written by the thread, read after it joined
  bool intact_ = true;
  std::thread thread_;
};

TEST_CASE("SshLauncher: a loopback daemon is reached through the session's tunnel", "[ssh]") {
  // More than the tunnel buffers in either direction (4 MiB), so both ends
  // have to wait for each other on the way.
  constexpr size_t kSent = size_t{9} << 20, kAnswered = size_t{6} << 20;
  LoopbackSink daemon(kAnswered);
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  WorkerLaunch launch =
      Shell(absl::StrCat("exec python3 -c '\n"
                         "import os, socket\n"
                         "host, port = os.environ[\"HOROVODD_DAEMON_ADDR\"].rsplit(\":\", 1)\n"
                         "print(\"told\", host, port, flush=True)\n"
                         "pattern = bytes(range(251)) * 40000\n"
                         "s = socket.create_connection((host, int(port)))\n"
                         "s.sendall(pattern[:",
                         kSent,
                         "])\n"
                         "s.shutdown(socket.SHUT_WR)\n"
                         "got = bytearray()\n"
                         "while True:\n"
                         "    b = s.recv(1 << 16)\n"
                         "    if not b: break\n"
                         "    got += b\n"
                         "print(\"got\", len(got), got == pattern[:len(got)])\n'"));
  launch.spec.env["HOROVODD_DAEMON_ADDR"] = absl::StrCat("127.0.0.1:", daemon.port());
  REQUIRE(launcher->Launch(launch, recorder.Callbacks()).ok());
  CHECK(recorder.AwaitExit().success());
  const std::vector<std::string> out = recorder.Lines(OutputStream::kStdout);
  INFO(absl::StrJoin(recorder.Lines(OutputStream::kStderr), "\n"));
  REQUIRE(out.size() == 2);
  // Told a port of its own host, not the daemon's.
  CHECK(absl::StartsWith(out[0], "told 127.0.0.1 "));
  CHECK(out[0] != absl::StrCat("told 127.0.0.1 ", daemon.port()));
  CHECK(out[1] == absl::StrCat("got ", kAnswered, " True"));
  CHECK(daemon.Received() == std::make_pair(kSent, true));
}

TEST_CASE("SshLauncher leaves any other daemon address as it is", "[ssh]") {
  ProcessRecorder recorder;
  auto launcher = MakeLauncher();
  WorkerLaunch launch = Shell("echo \"$HOROVODD_DAEMON_ADDR\"");
  launch.spec.env["HOROVODD_DAEMON_ADDR"] = "10.1.2.3:7451";
  REQUIRE(launcher->Launch(launch, recorder.Callbacks()).ok());
  CHECK(recorder.AwaitExit().success());
  CHECK(recorder.Lines(OutputStream::kStdout) == std::vector<std::string>{"10.1.2.3:7451"});
}

TEST_CASE("ParseLoopbackAddress knows the addresses no other host can dial", "[ssh]") {
  CHECK(ParseLoopbackAddress("127.0.0.1:7451")->port == 7451);
  CHECK(ParseLoopbackAddress("127.3.4.5:1")->host == "127.3.4.5");
  CHECK(ParseLoopbackAddress("localhost:80")->host == "localhost");
  CHECK(ParseLoopbackAddress("[::1]:7451")->host == "::1");
  CHECK_FALSE(ParseLoopbackAddress("10.0.0.1:7451"));
  CHECK_FALSE(ParseLoopbackAddress("node1:7451"));
  CHECK_FALSE(ParseLoopbackAddress("127.0.0.1"));
  CHECK_FALSE(ParseLoopbackAddress("127.0.0.1:0"));
  CHECK_FALSE(ParseLoopbackAddress("127.0.0.1:99999"));
  CHECK_FALSE(ParseLoopbackAddress("[::1]7451"));
}

}  // namespace
}  // namespace horovodd::daemon
