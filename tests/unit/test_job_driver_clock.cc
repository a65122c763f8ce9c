// A JobDriver on a SimulatedClock, with a launcher that records launches:
// the deadlines a user would otherwise wait minutes for (--elastic-timeout
// below --min-np, --liveness-timeout, --start-timeout) end the job as soon as
// the test moves time past them, and not a moment before.
#include <csignal>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "simulated_job.h"

namespace horovodd::daemon {
namespace {

using namespace simulated;  // NOLINT: the fixtures of every test here

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

// One local worker under horovodrun's default --liveness-timeout (2 s),
// started and attached (the Attach counted) before the test moves time.
struct AttachedWorkerJob {
  explicit AttachedWorkerJob(double liveness_timeout_s = 2) : job(Spec(liveness_timeout_s)) {
    REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 1; }));
    worker_id = job.launcher.worker_ids().front();
    job.driver->Attach(worker_id, std::make_shared<NullChannel>());
    job.driver->Status();  // barrier: attached
  }
  // The clock moves on by `quiet` and the worker is still alive; then by
  // `more`, and it has been killed (SIGKILL), the job failed saying `why`.
  void ExpectLostAfter(absl::Duration quiet, absl::Duration more, const std::string& why) {
    job.clock.Advance(quiet);
    CHECK(job.driver->Status().state() == v1::PENDING);
    CHECK(job.launcher.signals().empty());
    job.clock.Advance(more);
    REQUIRE(WaitUntil([&] { return !job.launcher.signals().empty(); }));
    CHECK(job.launcher.signals() == std::vector<int>{SIGKILL});
    CHECK_THAT(EndedStatus(*job.driver).reason(), Catch::Contains(why));
  }
  static v1::JobSpec Spec(double liveness_timeout_s) {
    v1::JobSpec spec = testing::OneLocalWorkerSpec({"train"});
    spec.set_liveness_timeout_seconds(liveness_timeout_s);
    return spec;
  }
  SimulatedJob job;
  int64_t worker_id = 0;
};

TEST_CASE("simulated time: a silent worker is found in under 3 s with a 2 s timeout",
          "[job_driver]") {
  // --liveness-timeout 2 s, the heartbeat every 500 ms (HeartbeatSchedule:
  // a quarter of it) until the worker stops.
  AttachedWorkerJob attached;
  SimulatedJob& job = attached.job;
  const int64_t worker_id = attached.worker_id;
  // A long step: heartbeats, but no rendezvous or other call for 20 s; one
  // heartbeat 1.5 s late on a loaded machine is no alarm either.
  for (int i = 0; i < 40; ++i) {
    job.clock.Advance(absl::Milliseconds(i == 20 ? 1500 : 500));
    job.driver->Heartbeat(worker_id);
    job.driver->Status();  // barrier: the heartbeat counted
  }
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());
  // Stopped (SIGSTOP): silence. Not lost at exactly the timeout, but at the
  // next check, which runs every 250 ms: by 2.25 s of silence.
  attached.ExpectLostAfter(absl::Seconds(2), absl::Milliseconds(900),
                           "silent for 2250 ms (--liveness-timeout 2s)");
}

// Whether one of `status`'s recent events says `text`.
bool SaysInEvents(const v1::JobStatus& status, absl::string_view text) {
  for (const v1::JobEvent& e : status.recent_events()) {
    if (absl::StrContains(e.message(), text)) return true;
  }
  return false;
}

TEST_CASE("simulated time: a daemon stalled past --liveness-timeout kills none it could not hear",
          "[job_driver]") {
  // The daemon's process (or its whole machine) stopped for 6 s, three times
  // the timeout: the workers' heartbeats wait unread in its sockets. On
  // waking its liveness check runs first: the workers were not silent, the
  // daemon was deaf. It says so, and does not count that time as silence.
  AttachedWorkerJob attached;
  SimulatedJob& job = attached.job;
  const int64_t worker_id = attached.worker_id;
  job.clock.Jump(absl::Seconds(6));
  v1::JobStatus status = job.driver->Status();
  CHECK(status.state() == v1::PENDING);
  CHECK(job.launcher.signals().empty());
  CHECK(SaysInEvents(status,
                     "horovodd did not run for 6000 ms (the daemon or its machine was stalled)"));
  // Its heartbeats, read now, keep it alive; a real silence is still found.
  job.driver->Heartbeat(worker_id);
  job.driver->Status();
  attached.ExpectLostAfter(absl::Seconds(2), absl::Milliseconds(250),
                           "silent for 2250 ms (--liveness-timeout 2s)");
}

TEST_CASE(
    "simulated time: a daemon stall past a heartbeat interval is no one's silence, at any "
    "timeout",
    "[job_driver]") {
  // horovodrun's default --liveness-timeout 10 s: heartbeats still come
  // every 500 ms, the check every second. A stall of 2 s is the daemon's
  // (the check ran a second past its due time, more than a heartbeat
  // interval): it is said and taken off, though it is far under the timeout.
  AttachedWorkerJob attached(/*liveness_timeout_s=*/10);
  SimulatedJob& job = attached.job;
  job.clock.Jump(absl::Seconds(2));
  v1::JobStatus status = job.driver->Status();
  CHECK(SaysInEvents(status, "horovodd did not run for 2000 ms"));
  // The worker, last heard at its Attach (0 s), is silent from then on. A
  // second of the stall (all but the check's period) is taken off: it is
  // still alive at 11 s, past the timeout by the clock alone, and lost at
  // the check of 12 s.
  attached.ExpectLostAfter(absl::Seconds(9), absl::Seconds(1),
                           "silent for 12000 ms (--liveness-timeout 10s)");
}

// The status of worker `id`'s KvSet of `key` in `generation`.
absl::Status SetKey(JobDriver& driver, int64_t id, int64_t generation, const std::string& key) {
  v1::KvSetRequest request;
  request.mutable_who()->set_job_id("job-sim");
  request.mutable_who()->set_worker_id(id);
  request.set_generation(generation);
  request.set_key(key);
  request.set_value("v");
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  driver.KvSet(request, [done](absl::Status status) { done->set_value(std::move(status)); });
  REQUIRE(result.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  return result.get();
}

TEST_CASE("simulated time: while a job grows its members keep their generation's keys",
          "[job_driver]") {
  TwoHostJob two;
  JobDriver& driver = *two.job.driver;
  // 127.0.0.1 drained: its two workers leave, the two on localhost form generation 2.
  driver.SetDrained("127.0.0.1", true);
  auto first = Ask(driver, 1, 1);
  auto second = Ask(driver, 2, 1);
  REQUIRE(first->Get().ok());
  REQUIRE(second->Get().ok());
  REQUIRE(driver.Status().generation() == 2);
  REQUIRE(SetKey(driver, 1, 2, "ring/0").ok());

  // Undrained: two new workers start there; the members train on in generation 2
  // (a lazy ring connects new pairs through its keys) until the new ones wait.
  driver.SetDrained("127.0.0.1", false);
  REQUIRE(WaitUntil([&] { return two.job.launcher.worker_ids().size() == 6; }));
  CHECK(SetKey(driver, 2, 2, "ring/1").ok());
  CHECK(SetKey(driver, 5, 3, "early").ok());  // a new worker may write ahead
  auto fifth = Ask(driver, 5, 0);
  auto sixth = Ask(driver, 6, 0);
  // Once every new worker waits, the members are told; generation 2's keys are gone.
  REQUIRE(WaitUntil([&] { return !SetKey(driver, 1, 2, "late").ok(); }));
  auto a = Ask(driver, 1, 2);
  auto b = Ask(driver, 2, 2);
  REQUIRE(fifth->Get().ok());
  REQUIRE(sixth->Get().ok());
  REQUIRE(a->Get().ok());
  CHECK(a->Get()->size() == 4);
}

TEST_CASE("simulated time: when every host is blacklisted at once, every survivor stays",
          "[job_driver]") {
  TwoHostJob two;
  JobDriver& driver = *two.job.driver;
  // One worker on each host fails in the same step. Worker 1 (localhost)
  // saw its ring break first and waits for the next generation.
  auto held = Ask(driver, 1, 1);
  two.job.launcher.Exit(1, 1);  // worker 2, localhost: blacklisted
  driver.Status();              // barrier
  // Worker 1 would leave (its host is blacklisted and 127.0.0.1 has
  // survivors), but it is not told before the plan forms.
  CHECK_FALSE(held->answered());
  two.job.launcher.Exit(2, 1);  // worker 3, 127.0.0.1: blacklisted too
  // Now every survivor is on a blacklisted host: both stay, at size 2.
  auto other = Ask(driver, 4, 1);
  absl::StatusOr<v1::RendezvousResponse> first = held->Get();
  absl::StatusOr<v1::RendezvousResponse> second = other->Get();
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK_FALSE(first->removed());
  CHECK(first->size() == 2);
  CHECK(first->rank() == 0);  // the survivors keep their order
  CHECK(second->rank() == 1);
  CHECK(first->generation() == second->generation());
  v1::JobStatus status = driver.Status();
  CHECK(status.state() == v1::RUNNING);
  CHECK_FALSE(driver.Ended());
}

TEST_CASE("simulated time: a worker leaving a blacklisted host hears it once the plan forms",
          "[job_driver]") {
  TwoHostJob two;
  JobDriver& driver = *two.job.driver;
  auto leaving = Ask(driver, 1, 1);
  two.job.launcher.Exit(1, 1);  // worker 2, localhost: blacklisted
  driver.Status();
  CHECK_FALSE(leaving->answered());
  auto third = Ask(driver, 3, 1);
  auto fourth = Ask(driver, 4, 1);
  absl::StatusOr<v1::RendezvousResponse> kept = third->Get();
  REQUIRE(kept.ok());
  CHECK(kept->size() == 2);
  absl::StatusOr<v1::RendezvousResponse> gone = leaving->Get();
  REQUIRE(gone.ok());
  CHECK(gone->removed());
  // Asking again gets the same answer at once.
  absl::StatusOr<v1::RendezvousResponse> again = Ask(driver, 1, 1)->Get();
  REQUIRE(again.ok());
  CHECK(again->removed());
}

}  // namespace
}  // namespace horovodd::daemon
