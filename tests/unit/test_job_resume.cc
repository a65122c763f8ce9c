// JobDriver across a daemon restart, on a simulated clock with a launcher
// that records: a running job's checkpoint (what the journal keeps) is enough
// for a new driver to take the job back in the same generation, with the same
// ranks and no new launch; a worker not found again is failed as lost and the
// job resets around it; workers that all ended while the daemon was away past
// their grace period make the job FAILED, saying so.
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

// Records launches; keeps each process's callbacks so a test can end it.
class HeldLauncher final : public testing::FakeLauncherBase {
 public:
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t handle = next_handle_++;
    ++launches_;
    callbacks_[handle] = std::move(callbacks);
    return LaunchedProcess{handle, static_cast<int>(1000 + handle)};
  }
  absl::Status Signal(int64_t handle, int sig) override { return absl::OkStatus(); }
  int launches() {
    std::lock_guard<std::mutex> lock(mu_);
    return launches_;
  }
  // The process of `handle` exits with `code`.
  void Exit(int64_t handle, int code) {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      callbacks = callbacks_.at(handle);
    }
    ExitInfo exit;
    exit.exit_code = code;
    callbacks.on_exit(exit);
  }

 private:
  std::mutex mu_;
  int64_t next_handle_ = 1;
  int launches_ = 0;
  std::map<int64_t, ProcessCallbacks> callbacks_;
};

// Keeps the newest checkpoint, as the journal does.
class CheckpointKeeper final : public JobObserver {
 public:
  void OnJobCheckpoint(const std::string&, const JobCheckpoint& checkpoint) override {
    std::lock_guard<std::mutex> lock(mu_);
    newest_ = checkpoint;
  }
  std::optional<JobCheckpoint> newest() {
    std::lock_guard<std::mutex> lock(mu_);
    return newest_;
  }

 private:
  std::mutex mu_;
  std::optional<JobCheckpoint> newest_;
};

class NullChannel final : public WorkerChannel {
 public:
  void Send(const v1::DaemonMessage&) override {}
};

struct Job {
  explicit Job(const v1::JobSpec& spec) {
    JobContext context;
    context.job_id = "job-1";
    context.daemon_address = "127.0.0.1:1";
    context.launcher = &launcher;
    context.observer = &keeper;
    context.worker_token = "token";
    context.clock = &clock;
    context.checkpoints = true;
    driver = std::make_unique<JobDriver>(std::move(context), spec);
  }
  SimulatedClock clock;
  HeldLauncher launcher;
  CheckpointKeeper keeper;
  std::unique_ptr<JobDriver> driver;  // last: goes first
};

// Worker `id` asks for the first generation after `after`; its answer.
absl::StatusOr<v1::RendezvousResponse> Ask(JobDriver& driver, int64_t id, int64_t after,
                                           bool wait = true) {
  auto answer = std::make_shared<std::optional<absl::StatusOr<v1::RendezvousResponse>>>();
  auto mu = std::make_shared<std::mutex>();
  v1::RendezvousRequest request;
  request.mutable_who()->set_job_id("job-1");
  request.mutable_who()->set_worker_id(id);
  request.set_after_generation(after);
  driver.Rendezvous(request, [answer, mu](absl::StatusOr<v1::RendezvousResponse> r) {
    std::lock_guard<std::mutex> lock(*mu);
    *answer = std::move(r);
  });
  if (!wait) return absl::UnavailableError("not waited for");
  REQUIRE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(*mu);
    return answer->has_value();
  }));
  std::lock_guard<std::mutex> lock(*mu);
  return **answer;
}

// Trains `job`, of two workers, to generation 1 with a commit checkpointed.
void TrainToGeneration1(Job& job) {
  job.driver->Start();
  REQUIRE(WaitUntil([&] { return job.launcher.launches() == 2; }));
  // Both ask at once: the generation forms when the second one does.
  Ask(*job.driver, 1, 0, /*wait=*/false).IgnoreError();
  auto second = Ask(*job.driver, 2, 0);
  REQUIRE(second.ok());
  CHECK(second->generation() == 1);
  v1::CommitReport commit;
  commit.mutable_who()->set_worker_id(1);
  commit.set_generation(1);
  commit.set_commit(7);
  job.driver->ReportCommit(commit);
  job.driver->Status();                 // a barrier: the report is in
  job.clock.Advance(absl::Seconds(1));  // commits are checkpointed at most every 100 ms
  REQUIRE(WaitUntil([&] {
    auto c = job.keeper.newest();
    return c.has_value() && c->status.last_commit() == 7 && c->status.generation() == 1;
  }));
}

// A job of two workers trained to generation 1; the checkpoint it left.
JobCheckpoint RunToGeneration1(const v1::JobSpec& spec) {
  Job job(spec);
  TrainToGeneration1(job);
  return *job.keeper.newest();
}

const v1::HostStatus& HostOf(const v1::JobStatus& status, const std::string& host) {
  for (const auto& h : status.hosts()) {
    if (h.host() == host) return h;
  }
  FAIL("no host " << host);
  return status.hosts(0);
}

std::vector<ReattachedWorker> Found(const std::vector<int64_t>& ids) {
  std::vector<ReattachedWorker> found;
  for (int64_t id : ids)
    found.push_back({id, LaunchedProcess{100 + id, 1000 + static_cast<int>(id)}, false});
  return found;
}

TEST_CASE("a job taken back after a restart goes on in its generation, no reset", "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  const JobCheckpoint checkpoint = RunToGeneration1(spec);

  Job again(spec);
  auto callbacks =
      again.driver->Resume(checkpoint, Found({1, 2}), absl::Seconds(5), absl::Minutes(10));
  CHECK(callbacks.size() == 2);
  again.driver->Attach(1, std::make_shared<NullChannel>());
  again.driver->Attach(2, std::make_shared<NullChannel>());
  const v1::JobStatus status = again.driver->Status();
  CHECK(status.state() == v1::RUNNING);
  CHECK(status.generation() == 1);
  CHECK(status.size() == 2);
  CHECK(status.resets() == 0);
  CHECK(status.last_commit() == 7);
  CHECK(again.launcher.launches() == 0);  // nobody new started
  for (const auto& w : status.workers()) {
    CHECK(w.pid() == 1000 + w.worker_id());
    CHECK(w.rank() == w.worker_id() - 1);
  }
  // A worker that asks again for its generation gets the same rank back.
  auto answer = Ask(*again.driver, 2, 0);
  REQUIRE(answer.ok());
  CHECK(answer->generation() == 1);
  CHECK(answer->rank() == 1);
  CHECK(again.driver->Status().resets() == 0);
}

TEST_CASE("a worker whose shim is gone is lost; the job resets around it", "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  const JobCheckpoint checkpoint = RunToGeneration1(spec);

  Job again(spec);
  again.driver->Resume(checkpoint, Found({1}), absl::Seconds(5), absl::Minutes(10));
  REQUIRE(WaitUntil([&] { return again.driver->Status().resets() == 1; }));
  const v1::JobStatus status = again.driver->Status();
  CHECK(status.state() != v1::FAILED);
  bool lost_reported = false;
  for (const auto& e : status.recent_events()) {
    lost_reported |= absl::StrContains(e.message(), "its shim was not found");
  }
  CHECK(lost_reported);
}

TEST_CASE("workers that all ended while the daemon was away past their grace fail the job",
          "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  const JobCheckpoint checkpoint = RunToGeneration1(spec);

  Job again(spec);
  std::vector<ReattachedWorker> found = Found({1, 2});
  for (auto& w : found) w.exited = true;
  again.driver->Resume(checkpoint, found, absl::Seconds(40), absl::Seconds(30));
  const v1::JobStatus status = again.driver->Status();
  CHECK(status.state() == v1::FAILED);
  CHECK(absl::StrContains(status.reason(), "longer than the workers' grace period"));
  CHECK(again.launcher.launches() == 0);
}

TEST_CASE("a worker taken back that does not reconnect within its liveness timeout is lost",
          "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  spec.set_liveness_timeout_seconds(2);
  spec.set_start_timeout_seconds(30);
  const JobCheckpoint checkpoint = RunToGeneration1(spec);

  Job again(spec);
  again.driver->Resume(checkpoint, Found({1, 2}), absl::Seconds(5), absl::Minutes(10));
  again.driver->Attach(1, std::make_shared<NullChannel>());
  auto lost_reported = [&] {
    const v1::JobStatus status = again.driver->Status();
    for (const auto& e : status.recent_events()) {
      if (absl::StrContains(e.message(), "worker 2") &&
          absl::StrContains(e.message(),
                            "did not reconnect within --liveness-timeout 2s after "
                            "horovodd restarted")) {
        return true;
      }
    }
    return false;
  };
  again.clock.Advance(absl::Seconds(1));
  CHECK_FALSE(lost_reported());  // not yet
  again.clock.Advance(absl::Seconds(2));
  CHECK(WaitUntil(lost_reported));
}

TEST_CASE("a host cooling down keeps its cooldown and back-off count across a restart",
          "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);
  spec.set_blacklist_cooldown_min_seconds(10);  // LO * 2^n: 20 s, then 40 s
  spec.set_blacklist_cooldown_max_seconds(100);
  Job job(spec);
  TrainToGeneration1(job);
  job.launcher.Exit(2, 1);  // worker 2 fails: localhost cools down for 20 s
  REQUIRE(WaitUntil([&] {
    auto c = job.keeper.newest();
    return c.has_value() && !c->host_cooldowns.empty();
  }));
  const JobCheckpoint checkpoint = *job.keeper.newest();
  REQUIRE(checkpoint.host_cooldowns.size() == 1);
  const HostCooldown& written = checkpoint.host_cooldowns[0];
  CHECK(written.host == "localhost");
  CHECK(written.failures == 1);
  CHECK(written.cooldowns == 1);
  CHECK(written.until == job.clock.Now() + absl::Seconds(20));

  // The daemon comes back 5 s later: 15 s of it are left, as they would have been.
  Job again(spec);
  again.clock.Advance(job.clock.Now() - again.clock.Now() + absl::Seconds(5));
  auto callbacks =
      again.driver->Resume(checkpoint, Found({1}), absl::Seconds(5), absl::Minutes(10));
  v1::JobStatus status = again.driver->Status();
  CHECK(HostOf(status, "localhost").state() == "cooldown");
  CHECK(HostOf(status, "localhost").cooldown_seconds_left() == Approx(15));

  // Once it is over, the next failure backs off from the count it had: 40 s.
  again.clock.Advance(absl::Seconds(16));
  CHECK(HostOf(again.driver->Status(), "localhost").state() == "usable");
  ExitInfo failed;
  failed.exit_code = 1;
  REQUIRE(callbacks.count(1) == 1);
  callbacks[1].on_exit(failed);
  status = again.driver->Status();
  CHECK(HostOf(status, "localhost").cooldown_seconds_left() == Approx(40));
}

TEST_CASE("a host blacklisted for good stays so after a restart", "[resume]") {
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 1, 2);
  spec.set_elastic(true);  // no --blacklist-cooldown-range: for the rest of the job
  JobCheckpoint checkpoint = RunToGeneration1(spec);
  checkpoint.host_cooldowns.push_back(
      {"localhost", 1, 1, "worker 2 exited", absl::InfiniteFuture()});

  Job again(spec);
  again.driver->Resume(checkpoint, Found({1, 2}), absl::Seconds(5), absl::Minutes(10));
  again.clock.Advance(absl::Hours(24));
  const v1::JobStatus status = again.driver->Status();
  CHECK(HostOf(status, "localhost").state() == "cooldown");
  CHECK(HostOf(status, "localhost").cooldown_seconds_left() == -1);
}

}  // namespace
}  // namespace horovodd::daemon
