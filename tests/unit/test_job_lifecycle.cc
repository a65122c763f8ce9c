// JobLifecycle on its own: the tables its HVDD_CHECKs use, on every pair of
// states and of phases (Catch2 has no death tests: a move the table forbids
// is one the lifecycle would abort on), every allowed move made through its
// methods with the events each leaves, and the notice that the job ended.
#include <set>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "daemon/job_events/event_log.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/loop/clock.h"

namespace horovodd::daemon {
namespace {

using Phase = JobLifecycle::Phase;

const std::vector<v1::JobState> kStates = {v1::JOB_STATE_UNSPECIFIED,
                                           v1::PENDING,
                                           v1::RUNNING,
                                           v1::RESETTING,
                                           v1::SUCCEEDED,
                                           v1::FAILED,
                                           v1::CANCELLED};
const std::vector<Phase> kPhases = {Phase::kAwaitingHosts, Phase::kPlanning, Phase::kFinishing,
                                    Phase::kStopping, Phase::kEnded};

// The moves docs/architecture/job-lifecycle.md draws, written out again.
const std::set<std::pair<v1::JobState, v1::JobState>> kExpectedStateMoves = {
    {v1::PENDING, v1::RUNNING},     {v1::RUNNING, v1::RESETTING}, {v1::RESETTING, v1::RUNNING},
    {v1::PENDING, v1::SUCCEEDED},   {v1::PENDING, v1::FAILED},    {v1::PENDING, v1::CANCELLED},
    {v1::RUNNING, v1::SUCCEEDED},   {v1::RUNNING, v1::FAILED},    {v1::RUNNING, v1::CANCELLED},
    {v1::RESETTING, v1::SUCCEEDED}, {v1::RESETTING, v1::FAILED},  {v1::RESETTING, v1::CANCELLED},
};
const std::set<std::pair<Phase, Phase>> kExpectedPhaseMoves = {
    {Phase::kAwaitingHosts, Phase::kPlanning}, {Phase::kAwaitingHosts, Phase::kFinishing},
    {Phase::kPlanning, Phase::kFinishing},     {Phase::kAwaitingHosts, Phase::kStopping},
    {Phase::kPlanning, Phase::kStopping},      {Phase::kFinishing, Phase::kStopping},
    {Phase::kStopping, Phase::kEnded},
};

// A lifecycle with its event log, on a simulated clock, counting the
// checkpoints it asks for.
struct Job {
  Job() : lifecycle(events, clock, [this] { ++changes; }) {}

  std::vector<v1::JobEvent> Events() const {
    return events.WaitFrom(1, absl::InfinitePast()).events;
  }
  std::vector<v1::JobState> StateEvents() const {
    std::vector<v1::JobState> out;
    for (const v1::JobEvent& e : Events()) {
      if (e.kind() == v1::JobEvent::STATE) out.push_back(e.state());
    }
    return out;
  }

  SimulatedClock clock;
  EventLog events;
  int changes = 0;
  JobLifecycle lifecycle;
};

// Moves a new job to `state` the way a job gets there.
void Reach(JobLifecycle& lifecycle, v1::JobState state) {
  if (state == v1::RUNNING || state == v1::RESETTING) lifecycle.MoveTo(v1::RUNNING, 1);
  if (state == v1::RESETTING) lifecycle.MoveTo(v1::RESETTING, 2);
}

TEST_CASE("job lifecycle: the state table, on every pair of states", "[job_lifecycle]") {
  for (v1::JobState from : kStates) {
    for (v1::JobState to : kStates) {
      INFO(v1::JobState_Name(from) << " -> " << v1::JobState_Name(to));
      CHECK(JobLifecycle::Allowed(from, to) == (kExpectedStateMoves.count({from, to}) == 1));
    }
  }
  // What the HVDD_CHECKs would stop: backwards, out of the end, into nowhere.
  CHECK_FALSE(JobLifecycle::Allowed(v1::RESETTING, v1::PENDING));
  CHECK_FALSE(JobLifecycle::Allowed(v1::RUNNING, v1::PENDING));
  CHECK_FALSE(JobLifecycle::Allowed(v1::FAILED, v1::RUNNING));
  CHECK_FALSE(JobLifecycle::Allowed(v1::SUCCEEDED, v1::FAILED));
  CHECK_FALSE(JobLifecycle::Allowed(v1::PENDING, v1::JOB_STATE_UNSPECIFIED));
}

TEST_CASE("job lifecycle: the phase table, on every pair of phases", "[job_lifecycle]") {
  for (Phase from : kPhases) {
    for (Phase to : kPhases) {
      INFO(JobLifecycle::PhaseName(from) << " -> " << JobLifecycle::PhaseName(to));
      CHECK(JobLifecycle::Allowed(from, to) == (kExpectedPhaseMoves.count({from, to}) == 1));
    }
  }
  // Phases only move forward, and the end comes only through stopping.
  CHECK_FALSE(JobLifecycle::Allowed(Phase::kFinishing, Phase::kPlanning));
  CHECK_FALSE(JobLifecycle::Allowed(Phase::kPlanning, Phase::kEnded));
  CHECK_FALSE(JobLifecycle::Allowed(Phase::kEnded, Phase::kStopping));
}

TEST_CASE("job lifecycle: a new job is PENDING, awaiting hosts, created now", "[job_lifecycle]") {
  Job job;
  CHECK(job.lifecycle.state() == v1::PENDING);
  CHECK(job.lifecycle.phase() == Phase::kAwaitingHosts);
  CHECK(job.lifecycle.reason().empty());
  CHECK_FALSE(job.lifecycle.Terminal());
  CHECK_FALSE(job.lifecycle.MayPlan());
  CHECK_FALSE(job.lifecycle.Ended());
  CHECK(job.lifecycle.created() == job.clock.Now());
  CHECK(job.lifecycle.started() == absl::Time());
  job.clock.Advance(absl::Seconds(2));
  job.lifecycle.MarkStarted();
  CHECK(job.lifecycle.started() == job.clock.Now());
  CHECK(job.Events().empty());
  CHECK_FALSE(job.lifecycle.WaitEnded(absl::ZeroDuration()));
}

TEST_CASE("job lifecycle: every allowed move of the state, each with its STATE event",
          "[job_lifecycle]") {
  for (const auto& [from, to] : kExpectedStateMoves) {
    DYNAMIC_SECTION(v1::JobState_Name(from) << " -> " << v1::JobState_Name(to)) {
      Job job;
      Reach(job.lifecycle, from);
      REQUIRE(job.lifecycle.state() == from);
      const size_t events_before = job.StateEvents().size();
      const int changes_before = job.changes;
      if (JobLifecycle::IsTerminal(to)) {
        job.clock.Advance(absl::Seconds(5));
        CHECK(job.lifecycle.End(to, "why", 7));
        CHECK(job.lifecycle.Terminal());
        CHECK(job.lifecycle.phase() == Phase::kStopping);
        CHECK(job.lifecycle.reason() == "why");
        CHECK(job.lifecycle.ended_at() == job.clock.Now());
      } else {
        job.lifecycle.MoveTo(to, 7);
        CHECK_FALSE(job.lifecycle.Terminal());
      }
      CHECK(job.lifecycle.state() == to);
      const std::vector<v1::JobState> states = job.StateEvents();
      REQUIRE(states.size() == events_before + 1);
      CHECK(states.back() == to);
      CHECK(job.Events().back().generation() == 7);
      CHECK(job.Events().back().message() == "job is " + v1::JobState_Name(to));
      CHECK(job.changes == changes_before + 1);
    }
  }
}

TEST_CASE("job lifecycle: moving to the state a job is in changes nothing", "[job_lifecycle]") {
  Job job;
  job.lifecycle.MoveTo(v1::PENDING, 0);
  job.lifecycle.MoveTo(v1::RUNNING, 1);
  job.lifecycle.MoveTo(v1::RUNNING, 2);  // a grown generation formed
  CHECK(job.StateEvents() == std::vector<v1::JobState>{v1::RUNNING});
  CHECK(job.changes == 1);
}

TEST_CASE("job lifecycle: hosts found once, then planning", "[job_lifecycle]") {
  Job job;
  CHECK(job.lifecycle.HostsFound());
  CHECK(job.lifecycle.phase() == Phase::kPlanning);
  CHECK(job.lifecycle.MayPlan());
  CHECK_FALSE(job.lifecycle.HostsFound());  // every later answer of discovery
  CHECK(job.lifecycle.phase() == Phase::kPlanning);
  CHECK(job.Events().empty());  // not a state of its own
}

TEST_CASE("job lifecycle: finishing ends planning, once", "[job_lifecycle]") {
  SECTION("from planning") {
    Job job;
    job.lifecycle.HostsFound();
    job.lifecycle.MoveTo(v1::RUNNING, 1);
    CHECK(job.lifecycle.StartFinishing());
    CHECK(job.lifecycle.Finishing());
    CHECK_FALSE(job.lifecycle.MayPlan());
    CHECK(job.lifecycle.state() == v1::RUNNING);  // what users see does not change
    CHECK_FALSE(job.lifecycle.StartFinishing());
    CHECK_FALSE(job.lifecycle.HostsFound());
    CHECK(job.lifecycle.phase() == Phase::kFinishing);
  }
  SECTION("before the hosts are known (a job taken back after a restart)") {
    Job job;
    CHECK(job.lifecycle.StartFinishing());
    CHECK(job.lifecycle.phase() == Phase::kFinishing);
    CHECK_FALSE(job.lifecycle.HostsFound());
  }
}

TEST_CASE("job lifecycle: the end from every phase before it", "[job_lifecycle]") {
  for (Phase before : {Phase::kAwaitingHosts, Phase::kPlanning, Phase::kFinishing}) {
    DYNAMIC_SECTION(JobLifecycle::PhaseName(before)) {
      Job job;
      if (before == Phase::kPlanning) job.lifecycle.HostsFound();
      if (before == Phase::kFinishing) job.lifecycle.StartFinishing();
      REQUIRE(job.lifecycle.phase() == before);
      CHECK(job.lifecycle.End(v1::CANCELLED, "cancelled by the user", 0));
      CHECK(job.lifecycle.phase() == Phase::kStopping);
      CHECK_FALSE(job.lifecycle.MayPlan());
      CHECK_FALSE(job.lifecycle.Finishing());
      CHECK_FALSE(job.lifecycle.Ended());  // its workers are still being stopped
    }
  }
}

TEST_CASE("job lifecycle: a job ends once; later ends change nothing", "[job_lifecycle]") {
  Job job;
  job.lifecycle.MoveTo(v1::RUNNING, 1);
  CHECK(job.lifecycle.End(v1::FAILED, "worker 1 exited with status 1", 1));
  const absl::Time ended = job.lifecycle.ended_at();
  job.clock.Advance(absl::Seconds(1));
  CHECK_FALSE(job.lifecycle.End(v1::CANCELLED, "cancelled by the user", 1));
  CHECK(job.lifecycle.state() == v1::FAILED);
  CHECK(job.lifecycle.reason() == "worker 1 exited with status 1");
  CHECK(job.lifecycle.ended_at() == ended);
  CHECK(job.StateEvents() == std::vector<v1::JobState>{v1::RUNNING, v1::FAILED});
}

TEST_CASE("job lifecycle: closing publishes JOB_ENDED, closes the events and notifies",
          "[job_lifecycle]") {
  Job job;
  job.lifecycle.MoveTo(v1::RUNNING, 3);
  job.lifecycle.End(v1::SUCCEEDED, "all 2 workers of generation 3 finished", 3);
  const int changes = job.changes;
  job.lifecycle.Close(3);
  CHECK(job.lifecycle.phase() == Phase::kEnded);
  CHECK(job.lifecycle.Ended());
  CHECK(job.lifecycle.WaitEnded(absl::ZeroDuration()));
  CHECK(job.changes == changes);  // the journal has JOB_ENDED; no checkpoint after it
  const EventLog::Batch batch = job.events.WaitFrom(1, absl::InfinitePast());
  CHECK(batch.closed);
  REQUIRE_FALSE(batch.events.empty());
  const v1::JobEvent& end = batch.events.back();
  CHECK(end.kind() == v1::JobEvent::JOB_ENDED);
  CHECK(end.state() == v1::SUCCEEDED);
  CHECK(end.message() == "all 2 workers of generation 3 finished");
  CHECK(end.generation() == 3);
}

TEST_CASE("job lifecycle: a job taken back reports its state again", "[job_lifecycle]") {
  const absl::Time started = absl::FromUnixSeconds(1'700'000'000);
  SECTION("running") {
    Job job;
    job.lifecycle.Restore(v1::RUNNING, started, 4);
    CHECK(job.lifecycle.state() == v1::RUNNING);
    CHECK(job.lifecycle.phase() == Phase::kAwaitingHosts);  // until its hosts are restored
    CHECK(job.lifecycle.started() == started);
    CHECK(job.StateEvents() == std::vector<v1::JobState>{v1::RUNNING});
    CHECK(job.Events().back().generation() == 4);
    CHECK(job.changes == 1);
    job.lifecycle.HostsFound();
    job.lifecycle.MoveTo(v1::RESETTING, 5);  // and goes on from there
    CHECK(job.lifecycle.state() == v1::RESETTING);
  }
  SECTION("pending: nothing to report") {
    Job job;
    job.lifecycle.Restore(v1::PENDING, started, 0);
    CHECK(job.Events().empty());
    CHECK(job.changes == 0);
  }
  SECTION("ended while its workers were being stopped") {
    Job job;
    job.lifecycle.Restore(v1::CANCELLED, started, 2);
    CHECK(job.lifecycle.Terminal());
    CHECK(job.lifecycle.phase() == Phase::kStopping);
    CHECK_FALSE(job.lifecycle.End(v1::FAILED, "too late", 2));
    job.lifecycle.Close(2);
    CHECK(job.lifecycle.Ended());
  }
}

}  // namespace
}  // namespace horovodd::daemon
