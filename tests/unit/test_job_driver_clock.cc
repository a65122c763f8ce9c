// A JobDriver on a SimulatedClock, with a launcher that records launches:
// the deadlines a user would otherwise wait minutes for (--elastic-timeout
// below --min-np, --liveness-timeout, --start-timeout) end the job as soon as
// the test moves time past them, and not a moment before.
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "daemon/job/job_driver.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"
#include "fake_launcher.h"
#include "job_spec_support.h"
#include "wait_until.h"

namespace horovodd::daemon {
namespace {

using testing::WaitUntil;

// Records each launch instead of starting a process; a signal "ends" the
// worker as that signal would (its exit callback runs on the signalling thread).
class FakeLauncher final : public testing::FakeLauncherBase {
 public:
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t handle = next_handle_++;
    worker_ids_.push_back(std::stoll(launch.spec.env.at("HOROVODD_WORKER_ID")));
    hosts_.push_back(launch.host);
    callbacks_[handle] = std::move(callbacks);
    return LaunchedProcess{handle, static_cast<int>(1000 + handle)};
  }
  absl::Status Signal(int64_t handle, int sig) override {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(handle);
      if (it == callbacks_.end()) return absl::NotFoundError("already ended");
      callbacks = std::move(it->second);
      callbacks_.erase(it);
      signals_.push_back(sig);
    }
    ExitInfo exit;
    exit.signal = sig;
    if (callbacks.on_exit) callbacks.on_exit(exit);
    return absl::OkStatus();
  }

  // The process of the `n`-th launch (from 0) exits with `code`.
  void Exit(size_t n, int code) {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(static_cast<int64_t>(n) + 1);
      REQUIRE(it != callbacks_.end());
      callbacks = std::move(it->second);
      callbacks_.erase(it);
    }
    ExitInfo exit;
    exit.exit_code = code;
    callbacks.on_exit(exit);
  }
  std::vector<std::string> hosts() {
    std::lock_guard<std::mutex> lock(mu_);
    return hosts_;
  }

  std::vector<int64_t> worker_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_ids_;
  }
  std::vector<int> signals() {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_;
  }

 private:
  std::mutex mu_;
  int64_t next_handle_ = 1;
  std::vector<int64_t> worker_ids_;
  std::vector<std::string> hosts_;
  std::vector<int> signals_;
  std::map<int64_t, ProcessCallbacks> callbacks_;
};

class NullChannel final : public WorkerChannel {
 public:
  void Send(const v1::DaemonMessage&) override {}
};

// One job on simulated time. Status() doubles as a barrier: it runs on the
// job's loop after everything posted before it.
struct SimulatedJob {
  explicit SimulatedJob(v1::JobSpec spec) {
    JobContext context;
    context.job_id = "job-sim";
    context.daemon_address = "127.0.0.1:1";
    context.launcher = &launcher;
    context.worker_token = "token";
    context.clock = &clock;
    driver = std::make_unique<JobDriver>(std::move(context), std::move(spec));
    driver->Start();
  }

  SimulatedClock clock;
  FakeLauncher launcher;
  std::unique_ptr<JobDriver> driver;  // last: goes before the clock and launcher
};

v1::JobStatus EndedStatus(JobDriver& driver) {
  REQUIRE(WaitUntil([&] { return driver.Ended(); }));
  return driver.Status();
}

TEST_CASE("simulated time: a job below --min-np fails at --elastic-timeout, not before",
          "[job_driver]") {
  // Two workers needed, one slot discovered.
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 2, 2);
  spec.mutable_discovery()->mutable_hosts(0)->set_slots(1);
  spec.set_elastic(true);
  spec.set_elastic_timeout_seconds(600);
  SimulatedJob job(spec);

  v1::JobStatus status = job.driver->Status();
  CHECK(status.state() == v1::PENDING);
  CHECK(status.created_unix() == absl::ToDoubleSeconds(job.clock.Now() - absl::UnixEpoch()));
  CHECK(job.launcher.worker_ids().empty());  // never starts a job it cannot run

  job.clock.Advance(absl::Seconds(599));
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK_FALSE(job.driver->Ended());

  job.clock.Advance(absl::Seconds(2));
  status = EndedStatus(*job.driver);
  CHECK(status.state() == v1::FAILED);
  CHECK(status.reason() ==
        "could not reach --min-np 2 within --elastic-timeout 600s (1 usable slot(s))");
}

TEST_CASE("simulated time: a worker silent past --liveness-timeout is killed and fails the job",
          "[job_driver]") {
  v1::JobSpec spec = testing::OneLocalWorkerSpec({"train"});
  spec.set_liveness_timeout_seconds(30);
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 1; }));
  const int64_t worker_id = job.launcher.worker_ids().front();

  job.driver->Attach(worker_id, std::make_shared<NullChannel>());
  job.clock.Advance(absl::Seconds(20));
  job.driver->Heartbeat(worker_id);
  CHECK(job.driver->Status().state() == v1::PENDING);  // barrier: the heartbeat counted

  job.clock.Advance(absl::Seconds(29));  // 29 s after its heartbeat
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());

  job.clock.Advance(absl::Seconds(2));
  v1::JobStatus status = EndedStatus(*job.driver);
  CHECK(status.state() == v1::FAILED);
  CHECK(job.launcher.signals() == std::vector<int>{SIGKILL});
  CHECK_THAT(status.reason(), Catch::Contains("silent for 31000 ms (--liveness-timeout 30s)"));
  REQUIRE(status.workers_size() == 1);
  CHECK(status.workers(0).state() == v1::WORKER_FAILED);
}

TEST_CASE("simulated time: a worker that never connects is lost at --start-timeout",
          "[job_driver]") {
  v1::JobSpec spec = testing::OneLocalWorkerSpec({"train"});
  spec.set_start_timeout_seconds(45);
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 1; }));

  job.clock.Advance(absl::Seconds(44));
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());

  job.clock.Advance(absl::Seconds(2));
  v1::JobStatus status = EndedStatus(*job.driver);
  CHECK(status.state() == v1::FAILED);
  CHECK_THAT(status.reason(), Catch::Contains("did not connect within --start-timeout 45s"));
}

TEST_CASE(
    "simulated time: an attached worker that never asks for a rendezvous is lost at "
    "--start-timeout",
    "[job_driver]") {
  v1::JobSpec spec = testing::OneLocalWorkerSpec({"train"});
  spec.set_start_timeout_seconds(30);
  spec.set_elastic_timeout_seconds(1);  // not a start bound: Horovod's meaning
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 1; }));
  const int64_t worker_id = job.launcher.worker_ids().front();
  job.driver->Attach(worker_id, std::make_shared<NullChannel>());
  for (int i = 0; i < 29; ++i) {
    job.clock.Advance(absl::Seconds(1));
    job.driver->Heartbeat(worker_id);
  }
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());
  job.clock.Advance(absl::Seconds(2));
  job.driver->Heartbeat(worker_id);
  v1::JobStatus status = EndedStatus(*job.driver);
  CHECK_THAT(status.reason(),
             Catch::Contains("did not ask for a rendezvous within --start-timeout 30s"));
}

TEST_CASE("simulated time: a job uses every usable slot up to --max-np, hosts in listed order",
          "[job_driver]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 2, 0);
  spec.set_elastic(true);
  spec.mutable_discovery()->clear_hosts();
  for (auto [host, slots] : {std::pair{"localhost", 2}, std::pair{"127.0.0.1", 3}}) {
    auto* h = spec.mutable_discovery()->add_hosts();
    h->set_host(host);
    h->set_slots(slots);
  }
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 5; }));
  CHECK(job.launcher.hosts() ==
        std::vector<std::string>{"localhost", "localhost", "127.0.0.1", "127.0.0.1", "127.0.0.1"});
  spec.set_max_np(3);
  SimulatedJob capped(spec);
  REQUIRE(WaitUntil([&] { return capped.launcher.worker_ids().size() == 3; }));
  capped.driver->Status();  // barrier: nothing more was started
  CHECK(capped.launcher.worker_ids().size() == 3);
}

TEST_CASE("simulated time: when every worker failed and no host is usable the job fails at once",
          "[job_driver]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  spec.set_elastic_timeout_seconds(600);
  spec.set_blacklist_cooldown_min_seconds(0);  // no range: blacklisted for good
  spec.set_blacklist_cooldown_max_seconds(0);
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 2; }));
  job.launcher.Exit(0, 3);
  // Its host is blacklisted, but the other worker there is the only survivor: it stays.
  v1::JobStatus status = job.driver->Status();
  CHECK_FALSE(job.driver->Ended());
  REQUIRE(status.hosts_size() == 1);
  CHECK(status.hosts(0).state() == "cooldown");
  job.launcher.Exit(1, 4);
  // No time passes: no waiting out --elastic-timeout.
  status = EndedStatus(*job.driver);
  CHECK(status.state() == v1::FAILED);
  CHECK_THAT(status.reason(), Catch::StartsWith(kNonZeroExitMessage));
  CHECK_THAT(status.reason(),
             Catch::Contains("worker 1 (localhost, pid 1001) exited with status 3"));
}

TEST_CASE("simulated time: a silent worker is found in under 3 s with the default timeout",
          "[job_driver]") {
  // horovodrun's default --liveness-timeout 2 s, the heartbeat every 500 ms
  // (HeartbeatSchedule: a quarter of it) until the worker stops.
  v1::JobSpec spec = testing::OneLocalWorkerSpec({"train"});
  spec.set_liveness_timeout_seconds(2);
  SimulatedJob job(spec);
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 1; }));
  const int64_t worker_id = job.launcher.worker_ids().front();
  job.driver->Attach(worker_id, std::make_shared<NullChannel>());
  // A long step: heartbeats, but no rendezvous or other call for 20 s; one
  // heartbeat 1.5 s late on a loaded machine is no alarm either.
  for (int i = 0; i < 40; ++i) {
    job.clock.Advance(absl::Milliseconds(i == 20 ? 1500 : 500));
    job.driver->Heartbeat(worker_id);
    job.driver->Status();  // barrier: the heartbeat counted
  }
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());
  // Stopped (SIGSTOP): silence. Not lost at exactly the timeout...
  job.clock.Advance(absl::Seconds(2));
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());
  // ...and found before 3 s: the check runs often enough (every 250 ms) that
  // it has run, and killed it, by 2.9 s of silence.
  job.clock.Advance(absl::Milliseconds(900));
  REQUIRE(WaitUntil([&] { return !job.launcher.signals().empty(); }));
  CHECK(job.launcher.signals() == std::vector<int>{SIGKILL});
  CHECK_THAT(EndedStatus(*job.driver).reason(),
             Catch::Contains("silent for 2900 ms (--liveness-timeout 2s)"));
}

}  // namespace
}  // namespace horovodd::daemon
