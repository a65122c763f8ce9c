// A JobDriver on a SimulatedClock, with a launcher that records launches:
// the deadlines a user would otherwise wait minutes for (--elastic-timeout
// below --min-np, --liveness-timeout, --start-timeout) end the job as soon as
// the test moves time past them, and not a moment before.
#include <csignal>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
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

// A worker's pending rendezvous call: its answer once the driver gives one.
struct PendingAnswer {
  std::mutex mu;
  std::optional<absl::StatusOr<v1::RendezvousResponse>> answer;

  bool answered() {
    std::lock_guard<std::mutex> lock(mu);
    return answer.has_value();
  }
  absl::StatusOr<v1::RendezvousResponse> Get() {
    REQUIRE(WaitUntil([&] { return answered(); }));
    std::lock_guard<std::mutex> lock(mu);
    return *answer;
  }
};

// Worker `id` asks for the first generation after `after`.
std::shared_ptr<PendingAnswer> Ask(JobDriver& driver, int64_t id, int64_t after) {
  auto pending = std::make_shared<PendingAnswer>();
  v1::RendezvousRequest request;
  request.mutable_who()->set_job_id("job-sim");
  request.mutable_who()->set_worker_id(id);
  request.set_after_generation(after);
  driver.Rendezvous(request, [pending](absl::StatusOr<v1::RendezvousResponse> r) {
    std::lock_guard<std::mutex> lock(pending->mu);
    pending->answer = std::move(r);
  });
  return pending;
}

// Four workers, two on localhost and two on 127.0.0.1, blacklisted for good
// on a failure, in a formed generation 1; launch n (from 0) is worker n + 1.
struct TwoHostJob {
  static v1::JobSpec Spec() {
    v1::JobSpec spec = testing::LocalJobSpec({"train"}, 4, 2, 4);
    spec.set_elastic(true);
    spec.set_elastic_timeout_seconds(600);
    spec.set_blacklist_cooldown_min_seconds(0);
    spec.set_blacklist_cooldown_max_seconds(0);
    spec.mutable_discovery()->clear_hosts();
    for (const char* host : {"localhost", "127.0.0.1"}) {
      auto* h = spec.mutable_discovery()->add_hosts();
      h->set_host(host);
      h->set_slots(2);
    }
    return spec;
  }
  explicit TwoHostJob(v1::JobSpec spec = Spec()) : job(std::move(spec)) {
    REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 4; }));
    REQUIRE(job.launcher.hosts() ==
            std::vector<std::string>{"localhost", "localhost", "127.0.0.1", "127.0.0.1"});
    std::vector<std::shared_ptr<PendingAnswer>> first;
    for (int64_t id = 1; id <= 4; ++id) first.push_back(Ask(*job.driver, id, 0));
    for (auto& answer : first) REQUIRE(answer->Get().ok());
  }
  SimulatedJob job;
};

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

namespace horovodd::daemon {
namespace {

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

}  // namespace
}  // namespace horovodd::daemon
