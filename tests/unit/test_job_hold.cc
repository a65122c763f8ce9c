// A JobDriver whose decision gate is shut (a leader that cannot renew its
// etcd lease): a worker's exit or loss, a broken ring and the elastic
// timeout change nothing while it is held; reopened, the job acts on them
// as usual; closed (deposed), never.
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "daemon/decision_gate/decision_gate.h"
#include "simulated_job.h"

namespace horovodd::daemon {
namespace {

using namespace simulated;  // NOLINT: the fixtures of every test here

int CountCode(const v1::JobStatus& status, const std::string& code) {
  int n = 0;
  for (const v1::JobEvent& e : status.recent_events()) n += e.code() == code;
  return n;
}

bool Said(const v1::JobStatus& status, const std::string& text) {
  for (const v1::JobEvent& e : status.recent_events()) {
    if (absl::StrContains(e.message(), text)) return true;
  }
  return false;
}

constexpr char kWhy[] =
    "cannot renew the leader's etcd lease for 5s (etcd unreachable or without quorum)";

TEST_CASE("held decisions: a worker lost while held resets the job only once the gate reopens",
          "[job_driver]") {
  auto gate = std::make_shared<DecisionGate>();
  v1::JobSpec spec = TwoHostJob::Spec();
  spec.set_liveness_timeout_seconds(30);
  TwoHostJob two(spec, gate);
  JobDriver& driver = *two.job.driver;
  REQUIRE(driver.Status().generation() == 1);

  gate->Hold(kWhy);
  REQUIRE(WaitUntil([&] { return CountCode(driver.Status(), "decisions_held") == 1; }));
  CHECK(
      Said(driver.Status(), std::string("decisions held: ") + kWhy +
                                "; workers train on; a lost worker is acted on when etcd answers"));

  // Worker 2 (localhost) exits with 1; worker 1 sees its ring break.
  two.job.launcher.Exit(1, 1);
  auto broken = Ask(driver, 1, 1);
  // Workers 3 and 4 go silent past --liveness-timeout; 1 waits in its
  // rendezvous call and heartbeats.
  two.job.clock.Advance(absl::Seconds(25));
  driver.Heartbeat(1);
  driver.Status();  // barrier: the heartbeat counted
  two.job.clock.Advance(absl::Seconds(15));
  // 3 and 4, each said once.
  REQUIRE(WaitUntil([&] { return CountCode(driver.Status(), "worker_lost_held") == 2; }));
  v1::JobStatus status = driver.Status();
  CHECK(status.generation() == 1);
  CHECK(status.state() == v1::RUNNING);
  CHECK_FALSE(broken->answered());
  CHECK(two.job.launcher.worker_ids().size() == 4);  // nothing launched
  CHECK(two.job.launcher.signals().empty());         // nothing killed
  CHECK_FALSE(Said(status, "generation 2 planned"));
  two.job.clock.Advance(absl::Seconds(10));
  CHECK(CountCode(driver.Status(), "worker_lost_held") == 2);
  CHECK(two.job.launcher.signals().empty());
  CHECK(CountCode(driver.Status(), "decisions_held") == 1);

  // The lease is renewed: the exit counts as a failure (a reset), and the
  // silent workers are killed as lost at the liveness monitor's next check.
  for (int64_t id : {3, 4}) driver.Heartbeat(id);
  gate->Open();
  REQUIRE(WaitUntil([&] { return CountCode(driver.Status(), "decisions_resumed") == 1; }));
  status = driver.Status();
  CHECK(Said(status, "acting on 1 worker exit(s)"));
  CHECK(Said(status, "generation 2 planned"));
  CHECK(CountCode(status, "worker_failed") == 1);
  CHECK(status.state() == v1::RESETTING);
  // Worker 1 (on the blacklisted localhost) hears that it leaves; 3 and 4 form generation 2.
  auto third = Ask(driver, 3, 1);
  auto fourth = Ask(driver, 4, 1);
  REQUIRE(third->Get().ok());
  REQUIRE(fourth->Get().ok());
  CHECK(third->Get()->size() == 2);
  CHECK(driver.Status().state() == v1::RUNNING);
  CHECK(driver.Status().generation() == 2);
}

TEST_CASE("held decisions: a closed gate (deposed) acts on nothing", "[job_driver]") {
  auto gate = std::make_shared<DecisionGate>();
  TwoHostJob two(TwoHostJob::Spec(), gate);
  JobDriver& driver = *two.job.driver;
  gate->Hold(kWhy);
  gate->Close();
  gate->Open();  // no effect once closed
  two.job.launcher.Exit(1, 1);
  two.job.launcher.Exit(2, 1);
  two.job.clock.Advance(absl::Minutes(10));
  v1::JobStatus status = driver.Status();
  CHECK(gate->state() == DecisionGate::State::kClosed);
  CHECK(status.generation() == 1);
  CHECK(status.state() == v1::RUNNING);
  CHECK_FALSE(driver.Ended());
  CHECK(two.job.launcher.worker_ids().size() == 4);
  CHECK(two.job.launcher.signals().empty());
  CHECK(CountCode(status, "worker_failed") == 0);
  CHECK(CountCode(status, "decisions_resumed") == 0);
}

TEST_CASE("held decisions: the elastic timeout fails a job only once the gate reopens",
          "[job_driver]") {
  auto gate = std::make_shared<DecisionGate>();
  v1::JobSpec spec = testing::LocalJobSpec({"train"}, 2, 2, 2);
  spec.mutable_discovery()->mutable_hosts(0)->set_slots(1);
  spec.set_elastic(true);
  spec.set_elastic_timeout_seconds(600);
  SimulatedJob job(spec, gate);
  REQUIRE(job.driver->Status().state() == v1::PENDING);  // barrier: started, its timer armed
  gate->Hold(kWhy);
  job.clock.Advance(absl::Seconds(601));
  CHECK(job.driver->Status().state() == v1::PENDING);
  CHECK_FALSE(job.driver->Ended());
  gate->Open();
  v1::JobStatus status = EndedStatus(*job.driver);
  CHECK(status.state() == v1::FAILED);
  CHECK_THAT(status.reason(), Catch::Contains("--elastic-timeout 600s"));
}

TEST_CASE("held decisions: a job without a gate is never held", "[job_driver]") {
  TwoHostJob two;
  two.job.launcher.Exit(1, 1);
  REQUIRE(WaitUntil([&] { return Said(two.job.driver->Status(), "generation 2 planned"); }));
}

}  // namespace
}  // namespace horovodd::daemon
