// horovodd-shim and the ShimLauncher over it, against the real shim binary
// and real processes: output, exit statuses and signals pass through; the
// workers outlive the launcher (a daemon going away); a new launcher takes
// them back with the output kept meanwhile (dropped lines counted) and the
// exit statuses; a shim that dies takes its workers with it.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/launch/shim_client/shim_launcher.h"
#include "daemon/launch/shim_client/shim_launcher_internal.h"
#include "daemon/shim_protocol/shim_protocol.h"
#include "process_recorder.h"
#include "shim.pb.h"
#include "wait_until.h"

namespace horovodd::daemon {
namespace {

using testing::ProcessRecorder;
using testing::WaitUntil;

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/hvdd-shim-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() {
    // A shim that is ending may unlink its socket while the tree is removed:
    // remove_all then fails on the vanished file, and another pass finishes.
    std::error_code error;
    for (int attempt = 0; attempt < 5; ++attempt) {
      std::filesystem::remove_all(path, error);
      if (!error) return;
    }
  }
  std::string path;
};

ShimLauncherOptions OptionsIn(const TempDir& dir) {
  ShimLauncherOptions options;
  options.shim_binary = HVDD_BUILD_DIR "/bin/horovodd-shim";
  options.socket_dir = dir.path + "/shims";
  options.shim_idle_timeout = absl::Seconds(60);
  return options;
}

WorkerLaunch Shell(const std::string& script, int64_t worker_id, const std::string& job = "job-1") {
  WorkerLaunch launch;
  launch.host = "localhost";
  launch.spec.argv = {"/bin/sh", "-c", script};
  launch.spec.env = {{"PATH", "/usr/bin:/bin"},
                     {"HOROVODD_JOB_ID", job},
                     {"HOROVODD_WORKER_ID", std::to_string(worker_id)}};
  return launch;
}

bool Alive(int pid) { return kill(pid, 0) == 0; }

// What every case starts with: a temp dir and a launcher (a "daemon") over it.
struct ShimFixture {
  TempDir dir;
  ShimLauncherOptions options = OptionsIn(dir);
  std::unique_ptr<ShimLauncher> launcher = Start();

  // A launcher over the same dir and options: a daemon (re)started.
  std::unique_ptr<ShimLauncher> Start() const {
    absl::StatusOr<std::unique_ptr<ShimLauncher>> created = ShimLauncher::Create(options);
    REQUIRE(created.ok());
    return *std::move(created);
  }
};

TEST_CASE("shim frames are cut at their length prefix", "[shim]") {
  shim::v1::ShimEvent event;
  event.mutable_output()->set_line("hello");
  const std::string frame = shim::EncodeFrame(event);
  shim::FrameReader reader;
  reader.Append(frame.data(), 3);
  auto none = reader.Next();
  REQUIRE(none.ok());
  CHECK(!none->has_value());
  reader.Append(frame.data() + 3, frame.size() - 3);
  reader.Append(frame.data(), frame.size());
  for (int i = 0; i < 2; ++i) {
    auto next = reader.Next();
    REQUIRE(next.ok());
    REQUIRE(next->has_value());
    shim::v1::ShimEvent parsed;
    REQUIRE(parsed.ParseFromString(**next));
    CHECK(parsed.output().line() == "hello");
  }
  const char huge[4] = {0x7f, 0, 0, 0};
  reader.Append(huge, 4);
  CHECK(reader.Next().status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE_METHOD(ShimFixture, "a worker's output and exit status come through its shim", "[shim]") {
  ProcessRecorder worker;
  auto launched = launcher->Launch(Shell("echo one; echo two >&2; exit 3", 1), worker.Callbacks());
  REQUIRE(launched.ok());
  CHECK(launched->pid > 0);
  CHECK(worker.AwaitExit().exit_code == 3);
  const std::vector<std::string> lines = worker.TaggedLines();
  CHECK(std::count(lines.begin(), lines.end(), "out:one") == 1);
  CHECK(std::count(lines.begin(), lines.end(), "err:two") == 1);
  const std::string socket = launcher->SocketPath("job-1");
  const int shim_pid = launcher->ShimPid("job-1");
  CHECK(shim_pid > 0);
  CHECK(shim_pid != getpid());
  // The job is over (every exit status delivered): its shim ends.
  launcher->Close("job-1");
  CHECK(WaitUntil([&] { return !Alive(shim_pid) && !std::filesystem::exists(socket); }));
  CHECK(launcher->ShimPid("job-1") == 0);
}

TEST_CASE_METHOD(ShimFixture, "a command that cannot run is refused like LocalLauncher refuses it",
                 "[shim]") {
  ProcessRecorder worker;
  WorkerLaunch launch = Shell("", 1);
  launch.spec.argv = {"/no/such/program"};
  auto launched = launcher->Launch(launch, worker.Callbacks());
  REQUIRE(!launched.ok());
  CHECK(launched.status().code() == absl::StatusCode::kNotFound);
  CHECK(launched.status().message().find("/no/such/program") != std::string::npos);
}

TEST_CASE_METHOD(ShimFixture, "signals reach the worker through its shim", "[shim]") {
  ProcessRecorder worker;
  auto launched = launcher->Launch(Shell("echo ready; exec sleep 100", 1), worker.Callbacks());
  REQUIRE(launched.ok());
  REQUIRE(WaitUntil([&] { return !worker.TaggedLines().empty(); }));
  REQUIRE(launcher->Signal(launched->handle, SIGTERM).ok());
  const ExitInfo exit = worker.AwaitExit();
  CHECK(exit.signal == SIGTERM);
  CHECK(launcher->Signal(launched->handle, SIGTERM).code() == absl::StatusCode::kNotFound);
}

TEST_CASE_METHOD(ShimFixture, "workers outlive the launcher, and a new one takes them back",
                 "[shim]") {
  options.shim_buffered_lines = 100;
  launcher = Start();
  const std::string go = dir.path + "/go";
  ProcessRecorder before;
  int pid = 0;
  {
    // Waits for the file `go`, then prints 300 lines (more than the shim
    // keeps) and exits 7.
    const std::string script =
        absl::StrCat("echo started; while [ ! -e ", go,
                     " ]; do sleep 0.05; done; "
                     "i=0; while [ $i -lt 300 ]; do echo line$i; i=$((i+1)); done; exit 7");
    WorkerLaunch launch = Shell(script, 5);
    launch.spec.env["HOROVODD_WORKER_TOKEN"] = "secret";
    auto launched = launcher->Launch(launch, before.Callbacks());
    REQUIRE(launched.ok());
    pid = launched->pid;
    REQUIRE(WaitUntil([&] { return !before.TaggedLines().empty(); }));
    launcher.reset();  // the "daemon" goes away
  }
  CHECK(Alive(pid));
  CHECK(before.exit_calls() == 0);
  { std::ofstream(go) << "go"; }
  // The worker runs to its end with no daemon to read its output.
  REQUIRE(WaitUntil([&] { return !Alive(pid); }));

  ProcessRecorder after;
  launcher = Start();
  int64_t asked = 0;
  auto found = launcher->Reattach("job-1");
  REQUIRE(found.ok());
  REQUIRE(found->workers.size() == 1);
  CHECK(found->workers[0].worker_id == 5);
  CHECK(found->workers[0].process.pid == pid);
  CHECK(found->workers[0].exited);
  CHECK(found->worker_token == "secret");
  CHECK(found->daemon_away > absl::ZeroDuration());
  launcher->Adopt("job-1", [&](int64_t worker_id) {
    asked = worker_id;
    return after.Callbacks();
  });
  CHECK(asked == 5);
  CHECK(after.AwaitExit().exit_code == 7);
  const std::vector<std::string> lines = after.TaggedLines();
  REQUIRE(lines.size() == 101);  // the notice, then the newest 100 lines
  CHECK(lines[0] == "err:[horovodd-shim: 200 line(s) of output dropped while no daemon read them]");
  CHECK(lines[1] == "out:line200");
  CHECK(lines[100] == "out:line299");
}

TEST_CASE_METHOD(ShimFixture,
                 "a worker still running is taken back and stopped by the new launcher", "[shim]") {
  ProcessRecorder before, after;
  int pid = 0;
  {
    auto launched = launcher->Launch(Shell("exec sleep 100", 2), before.Callbacks());
    REQUIRE(launched.ok());
    pid = launched->pid;
    launcher.reset();
  }
  CHECK(Alive(pid));
  launcher = Start();
  auto found = launcher->Reattach("job-1");
  REQUIRE(found.ok());
  REQUIRE(found->workers.size() == 1);
  CHECK(!found->workers[0].exited);
  launcher->Adopt("job-1", [&](int64_t) { return after.Callbacks(); });
  CHECK(launcher->running() == 1);
  launcher->TerminateAll(absl::Seconds(10));
  CHECK(after.AwaitExit().signal == SIGTERM);
  CHECK(before.exit_calls() == 0);
  CHECK(!Alive(pid));
  CHECK(launcher->Reattach("job-2").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE_METHOD(ShimFixture, "a shim that dies takes its workers with it", "[shim]") {
  ProcessRecorder worker;
  auto launched = launcher->Launch(Shell("exec sleep 100", 1), worker.Callbacks());
  REQUIRE(launched.ok());
  const int shim_pid = launcher->ShimPid("job-1");
  REQUIRE(shim_pid > 0);
  REQUIRE(kill(shim_pid, SIGKILL) == 0);
  const ExitInfo exit = worker.AwaitExit();
  CHECK(exit.exit_code == -1);  // the status was lost with the shim
  CHECK(WaitUntil([&] { return !Alive(launched->pid); }));
}

TEST_CASE_METHOD(ShimFixture, "a shim refuses a daemon of an unknown protocol or another job",
                 "[shim]") {
  ProcessRecorder worker;
  auto launched = launcher->Launch(Shell("exec sleep 100", 1), worker.Callbacks());
  REQUIRE(launched.ok());
  for (const auto& [version, job] : {std::pair{0u, "job-1"}, std::pair{1u, "job-9"}}) {
    auto fd = shim::ConnectUnix(launcher->SocketPath("job-1"));
    REQUIRE(fd.ok());
    shim::v1::ShimRequest hello;
    hello.mutable_hello()->set_protocol_version(version);
    hello.mutable_hello()->set_job_id(job);
    REQUIRE(shim::WriteAll(*fd, shim::EncodeFrame(hello)).ok());
    shim::FrameReader reader;
    shim::v1::ShimEvent answer;
    REQUIRE(shim::ReadMessage(*fd, reader, answer).ok());
    CHECK(answer.has_refused());
    close(*fd);
  }
  // The refused clients changed nothing: the launcher still drives the worker.
  CHECK(Alive(launched->pid));
  REQUIRE(launcher->Signal(launched->handle, SIGKILL).ok());
  CHECK(worker.AwaitExit().signal == SIGKILL);
}

TEST_CASE("a daemon's remote shim dir is named the same after a restart, and apart from others",
          "[shim]") {
  const std::string one = ShimNamespaceOf("/var/lib/horovodd/shims");
  CHECK(one.size() == 16);
  CHECK(one.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(ShimNamespaceOf("/var/lib/horovodd/shims") == one);
  CHECK(ShimNamespaceOf("/srv/other/shims") != one);
}

TEST_CASE("a restarted daemon gathers a job's shims; the missing ones are warnings", "[shim]") {
  ShimContents local, remote;
  local.workers.push_back({1, LaunchedProcess{1, 100}, false});
  local.worker_token = "token";
  local.daemon_away = absl::Seconds(3);
  local.protocol_version = 2;
  remote.workers.push_back({2, LaunchedProcess{2, 200}, true});
  remote.daemon_away = absl::Seconds(5);
  remote.protocol_version = 1;
  std::vector<absl::StatusOr<ShimContents>> found = {
      local, remote, absl::UnavailableError("127.0.0.4 cannot be reached")};
  absl::StatusOr<ShimContents> all = MergeShimContents(std::move(found), true);
  REQUIRE(all.ok());
  REQUIRE(all->workers.size() == 2);
  CHECK(all->workers[1].process.pid == 200);
  CHECK(all->worker_token == "token");
  CHECK(all->daemon_away == absl::Seconds(5));
  CHECK(all->protocol_version == 1);
  CHECK(all->warnings == std::vector<std::string>{"127.0.0.4 cannot be reached"});

  // A job with remote hosts need not have had a shim here.
  found = {absl::NotFoundError("no shim answers for job-1"), remote};
  all = MergeShimContents(std::move(found), false);
  REQUIRE(all.ok());
  CHECK(all->warnings.empty());
  found = {absl::NotFoundError("no shim answers for job-1"),
           absl::UnavailableError("127.0.0.2 refused")};
  CHECK(MergeShimContents(std::move(found), false).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace horovodd::daemon
