// The driver's view of its ranks on a SimulatedClock: each worker's latest
// activity report, goodput of a job that resets, the straggler guard, and a
// stall's eviction below --min-np.
#include <cmath>
#include <csignal>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "simulated_job.h"

namespace horovodd::daemon {
namespace {

using namespace simulated;  // NOLINT: the fixtures of every test here

v1::WorkerActivity WaitingIn(const std::string& name, double waited_seconds, int64_t completed) {
  v1::WorkerActivity activity;
  activity.mutable_waiting()->set_name(name);
  activity.mutable_waiting()->set_operation("allreduce");
  activity.mutable_waiting()->set_waited_seconds(waited_seconds);
  activity.set_completed(completed);
  return activity;
}

const v1::WorkerStatus& WorkerOf(const v1::JobStatus& status, int64_t worker_id) {
  for (const auto& w : status.workers()) {
    if (w.worker_id() == worker_id) return w;
  }
  FAIL("no worker " << worker_id);
  return status.workers(0);
}

TEST_CASE("simulated time: the daemon keeps each worker's latest activity report", "[job_driver]") {
  SimulatedJob job(testing::LocalJobSpec({"train"}, 2, 2, 2));
  REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 2; }));
  const int64_t a = job.launcher.worker_ids()[0];
  const int64_t b = job.launcher.worker_ids()[1];
  job.driver->Attach(a, std::make_shared<NullChannel>());
  job.driver->Attach(b, std::make_shared<NullChannel>());

  // No report yet: no activity.
  v1::JobStatus status = job.driver->Status();
  CHECK_FALSE(WorkerOf(status, a).has_activity());
  job.driver->Heartbeat(a);  // a heartbeat without a report changes nothing
  CHECK_FALSE(WorkerOf(job.driver->Status(), a).has_activity());

  job.driver->Heartbeat(a, WaitingIn("grad.old", 1, 3));
  job.driver->Heartbeat(a, WaitingIn("grad.new", 2, 4));  // replaces the one before
  v1::WorkerActivity b_idle;
  b_idle.set_completed(4);
  job.driver->Heartbeat(b, b_idle);
  job.driver->Status();  // barrier: the reports arrived before time moves on
  const absl::Time reported = job.clock.Now();
  job.clock.Advance(absl::Seconds(5));

  status = job.driver->Status();
  const v1::WorkerStatus& wa = WorkerOf(status, a);
  REQUIRE(wa.has_activity());
  CHECK(wa.activity().waiting().name() == "grad.new");
  CHECK(wa.activity().completed() == 4);
  CHECK(wa.activity_unix() == absl::ToDoubleSeconds(reported - absl::UnixEpoch()));
  // Submitted 2 s before the report, which was 5 s ago: waiting 7 s now.
  CHECK(wa.activity().waiting().waited_seconds() == 7);
  CHECK(wa.activity().waiting().since_unix() ==
        absl::ToDoubleSeconds(reported - absl::Seconds(2) - absl::UnixEpoch()));
  const v1::WorkerStatus& wb = WorkerOf(status, b);
  REQUIRE(wb.has_activity());
  CHECK_FALSE(wb.activity().has_waiting());
  CHECK(wb.activity().completed() == 4);

  // A worker that exits keeps no report.
  job.launcher.Exit(0, 0);
  REQUIRE(WaitUntil([&] { return !WorkerOf(job.driver->Status(), a).has_activity(); }));
}

// Worker `id` committed its `commit`-th step in `generation`.
void Commit(JobDriver& driver, int64_t id, int64_t generation, int64_t commit) {
  v1::CommitReport report;
  report.mutable_who()->set_job_id("job-sim");
  report.mutable_who()->set_worker_id(id);
  report.set_generation(generation);
  report.set_commit(commit);
  driver.ReportCommit(report);
}

double Sum(const v1::JobGoodput& g) {
  return g.training_seconds() + g.starting_seconds() + g.waiting_seconds() + g.detection_seconds() +
         g.reset_seconds() + g.replay_seconds() + g.stall_seconds();
}

TEST_CASE("simulated time: a failed worker's job accounts its time as training, replay, reset",
          "[job_driver]") {
  TwoHostJob two;
  JobDriver& driver = *two.job.driver;
  SimulatedClock& clock = two.job.clock;
  // Ten steps of a second, each committed by every worker.
  for (int step = 1; step <= 10; ++step) {
    clock.Advance(absl::Seconds(1));
    for (int64_t id = 1; id <= 4; ++id) Commit(driver, id, 1, step);
    driver.Status();  // barrier: the commits counted at this moment
  }
  v1::JobGoodput g = driver.Status().goodput();
  CHECK(g.wall_seconds() == 10);
  CHECK(g.training_seconds() == 10);
  CHECK(g.goodput() == 1);

  // 300 ms into the next step worker 2 (localhost) dies; its host goes,
  // and the two on 127.0.0.1 form generation 2.
  clock.Advance(absl::Milliseconds(300));
  two.job.launcher.Exit(1, 1);
  auto third = Ask(driver, 3, 1);
  auto fourth = Ask(driver, 4, 1);
  REQUIRE(third->Get().ok());
  REQUIRE(fourth->Get().ok());
  REQUIRE(driver.Status().generation() == 2);
  clock.Advance(absl::Seconds(1));
  Commit(driver, 3, 2, 11);  // the first step of generation 2
  driver.Status();
  clock.Advance(absl::Seconds(5));

  g = driver.Status().goodput();
  CHECK(g.wall_seconds() == Approx(16.3));
  CHECK(Sum(g) == Approx(g.wall_seconds()));
  CHECK(g.replay_seconds() == Approx(0.3));  // the step the failure cut short
  CHECK(g.reset_seconds() == Approx(1));     // no step time reported: resumed at the commit
  CHECK(g.training_seconds() == Approx(15));
  CHECK(g.goodput() == Approx(15 / 16.3));

  // Nothing counts after the end.
  driver.Cancel("done");
  REQUIRE(WaitUntil([&] { return driver.Status().state() == v1::CANCELLED; }));
  const v1::JobStatus ended = driver.Status();
  clock.Advance(absl::Seconds(30));
  g = driver.Status().goodput();
  CHECK(g.wall_seconds() == Approx(ended.ended_unix() - ended.started_unix()));
  CHECK(g.wall_seconds() == Approx(16.3));
  CHECK(Sum(g) == Approx(g.wall_seconds()));
}

// What a worker reports after steps of `step` seconds, `wait` of them spent
// in collectives.
v1::WorkerActivity Stepping(double step, double wait) {
  v1::WorkerActivity activity;
  activity.set_step_seconds(step);
  activity.set_step_wait_seconds(wait);
  activity.set_since_commit_seconds(-1);
  return activity;
}

int EventsWithCode(const v1::JobStatus& status, const std::string& code) {
  int n = 0;
  for (const v1::JobEvent& e : status.recent_events()) n += e.code() == code;
  return n;
}

// When the first event with `code` was recorded (InfiniteFuture: none was).
absl::Time FirstEventTime(const v1::JobStatus& status, const std::string& code) {
  for (const v1::JobEvent& e : status.recent_events()) {
    if (e.code() == code) return absl::FromUnixMicros(std::llround(e.time_unix() * 1e6));
  }
  return absl::InfiniteFuture();
}

TEST_CASE("simulated time: stragglers on every host are not all evicted below --min-np",
          "[job_driver]") {
  v1::JobSpec spec = TwoHostJob::Spec();
  spec.set_evict_stragglers(2);
  TwoHostJob two(spec);
  JobDriver& driver = *two.job.driver;
  SimulatedClock& clock = two.job.clock;
  // Ranks 0 (worker 1, localhost) and 2 (worker 3, 127.0.0.1) compute 0.5 s
  // a step; ranks 1 and 3 compute 0.1 s and wait 0.4 s for them. Each slow
  // one computes five times the others' median: both are to be evicted.
  for (int64_t id = 1; id <= 4; ++id) {
    driver.Heartbeat(id, id % 2 == 1 ? Stepping(0.5, 0) : Stepping(0.5, 0.4));
  }
  driver.Status();  // barrier: the reports arrived before time moves on
  // The detector's first look starts their windows.
  clock.Advance(absl::Milliseconds(200));
  REQUIRE(WaitUntil([&] {
    const v1::JobStatus s = driver.Status();
    return WorkerOf(s, 1).straggler() && WorkerOf(s, 3).straggler();
  }));
  CHECK(two.job.launcher.signals().empty());

  // Past the window: evicting either host leaves the other's two ranks
  // (--min-np 2), evicting both would leave none. One goes, the other stays.
  clock.Advance(StallDetector::kStragglerWindow + absl::Seconds(1));
  REQUIRE(WaitUntil([&] { return !two.job.launcher.signals().empty(); }));
  const v1::JobStatus status = driver.Status();  // barrier: that check is over
  CHECK(two.job.launcher.signals() == std::vector<int>{SIGTERM});
  CHECK(EventsWithCode(status, "worker_evicted") == 1);
  CHECK(EventsWithCode(status, "straggler_kept") == 1);
  CHECK_FALSE(driver.Ended());
}

TEST_CASE("simulated time: a stall evicts below --min-np; the job fails at --elastic-timeout",
          "[job_driver]") {
  v1::JobSpec spec = TwoHostJob::Spec();
  spec.set_min_np(3);
  // Under the fixture's --liveness-timeout (60 s): the silent workers are
  // not lost before the job's wait for slots ends.
  spec.set_elastic_timeout_seconds(30);
  (*spec.mutable_env())["HOROVOD_STALL_CHECK_TIME_SECONDS"] = "5";
  (*spec.mutable_env())["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "10";
  TwoHostJob two(spec);
  JobDriver& driver = *two.job.driver;
  SimulatedClock& clock = two.job.clock;
  // Ranks 1-3 wait in 'grad'; rank 0 (worker 1, localhost) never submits it
  // and says so after the others began to wait.
  for (int64_t id = 2; id <= 4; ++id) driver.Heartbeat(id, WaitingIn("grad", 0, 5));
  driver.Status();  // barrier: the reports arrived before time moves on
  clock.Advance(absl::Seconds(4));
  v1::WorkerActivity idle;
  idle.set_completed(5);
  idle.set_since_commit_seconds(-1);
  driver.Heartbeat(1, idle);
  driver.Status();

  // Past the shutdown time. Without localhost, 2 ranks would be left
  // (--min-np 3): the culprit is evicted all the same, and said to be.
  clock.Advance(absl::Seconds(7));
  REQUIRE(WaitUntil([&] { return !two.job.launcher.signals().empty(); }));
  v1::JobStatus status = driver.Status();  // barrier: that check is over
  CHECK(two.job.launcher.signals() == std::vector<int>{SIGTERM});
  CHECK(EventsWithCode(status, "stall_evict") == 1);
  CHECK(EventsWithCode(status, "stall_below_min_np") == 1);
  CHECK(EventsWithCode(status, "worker_evicted") == 1);
  CHECK(WorkerOf(status, 1).state() == v1::WORKER_FAILED);

  // As after any failure that leaves too few slots: the job waits for them
  // up to --elastic-timeout from the eviction, then fails.
  const absl::Time evicted = FirstEventTime(status, "worker_evicted");
  REQUIRE(evicted <= clock.Now());
  clock.Advance(evicted + absl::Seconds(29) - clock.Now());
  CHECK_FALSE(driver.Status().state() == v1::FAILED);
  CHECK_FALSE(driver.Ended());
  clock.Advance(absl::Seconds(2));
  status = EndedStatus(driver);
  CHECK(status.state() == v1::FAILED);
  CHECK_THAT(status.reason(),
             Catch::Contains("could not reach --min-np 3 within --elastic-timeout 30s"));
}

}  // namespace
}  // namespace horovodd::daemon
