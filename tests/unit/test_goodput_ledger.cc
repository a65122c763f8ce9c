// GoodputLedger on a simulated clock: each part of a job's wall time as the
// driver's events reveal it, and the parts adding up to the wall time.
#include <catch2/catch.hpp>

#include "daemon/goodput/goodput_ledger.h"
#include "daemon/loop/clock.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {
namespace {

double Sum(const v1::JobGoodput& g) {
  return g.training_seconds() + g.starting_seconds() + g.waiting_seconds() + g.detection_seconds() +
         g.reset_seconds() + g.replay_seconds() + g.stall_seconds();
}

// The parts add up to the wall time (to rounding), whatever happened.
void RequireAddsUp(const v1::JobGoodput& g) {
  REQUIRE(Sum(g) == Approx(g.wall_seconds()).margin(1e-6));
  REQUIRE(g.wall_seconds() >= 0);
  for (double part :
       {g.training_seconds(), g.starting_seconds(), g.waiting_seconds(), g.detection_seconds(),
        g.reset_seconds(), g.replay_seconds(), g.stall_seconds()}) {
    REQUIRE(part >= 0);
  }
}

v1::WorkerActivity Report(int64_t commits, double since_commit, double step) {
  v1::WorkerActivity a;
  a.set_last_commit(commits);
  a.set_since_commit_seconds(since_commit);
  a.set_step_seconds(step);
  return a;
}

struct Fixture {
  SimulatedClock clock;
  GoodputLedger ledger;
  void Advance(double seconds) { clock.Advance(absl::Seconds(seconds)); }
  absl::Time Now() const { return clock.Now(); }
  absl::Time Ago(double seconds) const { return clock.Now() - absl::Seconds(seconds); }
  v1::JobGoodput Goodput() const { return ledger.Report(clock.Now()); }
  // Started, 2 s to form generation 1, then training with a commit every second.
  void TrainFor(double seconds) {
    for (int i = 0; i < seconds; ++i) {
      Advance(1);
      ledger.Committed(1, Now());
    }
  }
};

TEST_CASE("goodput: a job that only trains is all goodput but its start") {
  Fixture f;
  f.ledger.Start(f.Now());
  RequireAddsUp(f.Goodput());
  f.Advance(2);
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(98);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.wall_seconds() == Approx(100));
  REQUIRE(g.starting_seconds() == Approx(2));
  REQUIRE(g.training_seconds() == Approx(98));
  REQUIRE(g.goodput() == Approx(0.98));
  f.ledger.End(f.Now());
  f.Advance(50);  // nothing counts after the end
  REQUIRE(f.Goodput().wall_seconds() == Approx(100));
  RequireAddsUp(f.Goodput());
}

TEST_CASE("goodput: too few slots at the start and after a failure is waiting") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.Advance(1);
  f.ledger.BelowMinNp(f.Now());
  f.Advance(10);
  f.ledger.EnoughSlots(f.Now());
  f.Advance(1);
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(20);
  f.ledger.FailureNoticed(f.Now(), f.Now());
  f.ledger.BelowMinNp(f.Now());
  f.Advance(30);
  f.ledger.GenerationReady(2, f.Now());  // the wait ends when the generation forms
  f.Advance(2);
  f.ledger.Committed(2, f.Now());
  f.TrainFor(5);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.starting_seconds() == Approx(2));
  REQUIRE(g.waiting_seconds() == Approx(40));
  REQUIRE(g.reset_seconds() == Approx(2));  // no usual step known: resumed at the commit
  REQUIRE(g.training_seconds() == Approx(25));
}

TEST_CASE("goodput: a failure splits training into replay and detection, then a reset") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.Advance(1);
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(10);                                     // commits each second: 10 s kept
  f.ledger.Activity(1, Report(10, 0, 1.0), f.Now());  // a usual step is 1 s
  f.Advance(0.6);                                     // 0.6 s of work after the commit...
  const absl::Time died = f.Now();
  f.Advance(0.2);  // ...then it died, noticed 0.2 s later
  f.ledger.FailureNoticed(died, f.Now());
  f.ledger.Interrupted(f.Now());
  f.Advance(0.5);
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(1.5);  // a state sync (0.5 s), then a step of 1 s to the first commit
  f.ledger.Committed(2, f.Now());
  f.Advance(3);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.starting_seconds() == Approx(1));
  REQUIRE(g.replay_seconds() == Approx(0.6));
  REQUIRE(g.detection_seconds() == Approx(0.2));
  REQUIRE(g.reset_seconds() == Approx(1.0));  // noticed -> ready -> sync; the first step trains
  REQUIRE(g.training_seconds() == Approx(10 + 1 + 3));
  REQUIRE(g.wall_seconds() == Approx(16.8));
}

TEST_CASE("goodput: a later notice of the same failure moves its moment earlier") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(5);
  f.Advance(1);
  const absl::Time exited = f.Ago(0.25);
  // A survivor's broken ring is noticed first; the launcher saw the exit earlier.
  f.ledger.FailureNoticed(f.Now(), f.Now());
  f.ledger.FailureNoticed(exited, f.Now());
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(0.75));
  REQUIRE(g.detection_seconds() == Approx(0.25));
  // A notice of a later moment changes nothing.
  f.ledger.FailureNoticed(f.Now(), f.Now());
  REQUIRE(f.Goodput().detection_seconds() == Approx(0.25));
}

TEST_CASE("goodput: a worker's report of a failed collective is the earliest sign of a failure") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(5);
  f.Advance(0.5);
  f.ledger.FailureSeen(f.Now());  // a survivor's collective failed
  f.Advance(0.01);
  f.ledger.FailureNoticed(f.Now(), f.Now());  // its broken ring, as its rendezvous says
  f.Advance(0.01);
  f.ledger.FailureNoticed(f.Now(), f.Now());  // the dead worker's exit, seen later
  v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(0.5));
  REQUIRE(g.detection_seconds() == Approx(0.01));
  REQUIRE(g.reset_seconds() == Approx(0.01));
  // Seen while the reset runs, it places that failure earlier still.
  f.ledger.FailureSeen(f.Ago(0.12));
  g = f.Goodput();
  REQUIRE(g.replay_seconds() == Approx(0.4));
  REQUIRE(g.detection_seconds() == Approx(0.11));
  RequireAddsUp(g);
  // A sign of a failure in training that resumed later is not this one.
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(1);
  f.ledger.Committed(2, f.Now());
  f.TrainFor(3);
  f.ledger.FailureNoticed(f.Now(), f.Now());
  REQUIRE(f.Goodput().detection_seconds() == Approx(0.11));
}

TEST_CASE("goodput: a worker lost to silence is detected from its last heartbeat") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(4);
  f.Advance(0.5);
  const absl::Time last_seen = f.Now();
  f.Advance(6);  // --liveness-timeout
  f.ledger.FailureNoticed(last_seen, f.Now());
  f.Advance(0.1);
  f.ledger.FailureNoticed(f.Now(), f.Now());  // its exit after the kill: the same reset
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(0.5));
  REQUIRE(g.detection_seconds() == Approx(6));
  REQUIRE(g.reset_seconds() == Approx(0.1));
}

TEST_CASE("goodput: a failure before any commit of the generation loses all its training") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(3);
  f.ledger.FailureNoticed(f.Now(), f.Now());
  f.ledger.Interrupted(f.Now());
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(1);
  f.ledger.Committed(2, f.Now());  // training resumed
  f.Advance(2);
  const absl::Time died = f.Now();
  f.ledger.FailureNoticed(died, f.Now());  // all since its first commit is lost
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(2));
  REQUIRE(g.training_seconds() == Approx(3));
  REQUIRE(g.reset_seconds() == Approx(1));
}

TEST_CASE("goodput: workers that never commit train again once the generation forms") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.Advance(1);
  f.ledger.GenerationReady(1, f.Now());
  f.Advance(10);
  f.ledger.FailureNoticed(f.Ago(0.5), f.Now());
  f.Advance(2);
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(7);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(9.5));  // no commit ever: nothing was kept
  REQUIRE(g.detection_seconds() == Approx(0.5));
  REQUIRE(g.reset_seconds() == Approx(2));
  REQUIRE(g.training_seconds() == Approx(7));
}

TEST_CASE("goodput: a membership change loses no work; a grow trains until its notice") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(10);
  f.Advance(0.4);
  f.ledger.Interrupted(f.Now());  // the joiners are ready: members told now
  f.Advance(0.6);
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(0.3);
  f.ledger.Committed(2, f.Now());  // usual step unknown: resumed at the commit
  f.TrainFor(4);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == 0);
  REQUIRE(g.detection_seconds() == 0);
  REQUIRE(g.reset_seconds() == Approx(0.9));
  REQUIRE(g.training_seconds() == Approx(14.4));
}

TEST_CASE("goodput: a commit of the old generation after the new one formed resumes nothing") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(2);
  f.ledger.Interrupted(f.Now());
  f.Advance(1);
  f.ledger.GenerationReady(2, f.Now());
  f.Advance(1);
  f.ledger.Committed(1, f.Now());   // late report of the old generation
  f.ledger.Committed(2, f.Ago(3));  // a commit of before the generation formed
  REQUIRE(f.Goodput().reset_seconds() == Approx(2));
  f.ledger.Committed(2, f.Now());
  f.Advance(1);
  REQUIRE(f.Goodput().reset_seconds() == Approx(2));
  REQUIRE(f.Goodput().training_seconds() == Approx(3));
}

TEST_CASE("goodput: waits far longer than a step are stalls, counted once however reported") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(10);
  f.ledger.Activity(1, Report(10, 0, 0.5), f.Now());  // usual step 0.5 s
  // A wait of 2 s: within five steps, no stall.
  v1::WorkerActivity waiting = Report(10, 2, 0.5);
  waiting.mutable_waiting()->set_waited_seconds(2);
  f.Advance(2);
  f.ledger.Activity(1, waiting, f.Now());
  REQUIRE(f.Goodput().stall_seconds() == 0);
  // It goes on: at 4 s it is a stall, counted beyond one usual step (3.5 s).
  f.Advance(2);
  waiting.mutable_waiting()->set_waited_seconds(4);
  f.ledger.Activity(1, waiting, f.Now());
  REQUIRE(f.Goodput().stall_seconds() == Approx(3.5));
  // Two ranks report the same stall, and again a second later: 4.5 s, once.
  f.Advance(1);
  waiting.mutable_waiting()->set_waited_seconds(5);
  f.ledger.Activity(1, waiting, f.Now());
  f.ledger.Activity(1, waiting, f.Now());
  REQUIRE(f.Goodput().stall_seconds() == Approx(4.5));
  // The stall detector's named stall overlaps it: still counted once.
  f.ledger.Stalled(f.Ago(5), f.Now());
  REQUIRE(f.Goodput().stall_seconds() == Approx(5));
  f.ledger.Committed(1, f.Now());
  f.Advance(1);
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.training_seconds() == Approx(11));
}

TEST_CASE("goodput: without a usual step a long wait is not judged a stall") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(10);
  // No commits (a fixed-size job): a collective of 30 s is training as far as the reports go.
  v1::WorkerActivity waiting;
  waiting.mutable_waiting()->set_waited_seconds(30);
  f.Advance(30);
  f.ledger.Activity(1, waiting, f.Now());
  REQUIRE(f.Goodput().stall_seconds() == 0);
  // The stall detector named it 10 s ago: from then it is a stall.
  f.ledger.Stalled(f.Ago(10), f.Now());
  const v1::JobGoodput g = f.Goodput();
  REQUIRE(g.stall_seconds() == Approx(10));
  RequireAddsUp(g);
}

TEST_CASE("goodput: a stall that ends in a failure is detection where they overlap") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(10);
  f.Advance(1);
  const absl::Time last_seen = f.Now();  // the hung rank's last heartbeat
  f.Advance(8);
  f.ledger.Stalled(f.Ago(8), f.Now());
  f.ledger.FailureNoticed(last_seen, f.Now());
  const v1::JobGoodput g = f.Goodput();
  RequireAddsUp(g);
  REQUIRE(g.replay_seconds() == Approx(1));
  REQUIRE(g.detection_seconds() == Approx(8));
  REQUIRE(g.stall_seconds() == 0);
}

TEST_CASE("goodput: stalls outside training count as what the job was doing") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.Advance(5);
  f.ledger.Stalled(f.Ago(5), f.Now());
  REQUIRE(f.Goodput().stall_seconds() == 0);
  REQUIRE(f.Goodput().starting_seconds() == Approx(5));
}

TEST_CASE("goodput: a job taken back after a restart goes on from its earlier parts") {
  Fixture f;
  f.ledger.Start(f.Now());
  f.Advance(1);
  f.ledger.GenerationReady(1, f.Now());
  f.TrainFor(9);
  const absl::Time started = f.Ago(10);
  const v1::JobGoodput before = f.Goodput();
  f.Advance(3);  // the daemon was away; the workers trained on
  GoodputLedger restored;
  restored.Restore(before, started, /*running=*/true, f.Now());
  f.Advance(2);
  const v1::JobGoodput g = restored.Report(f.Now());
  RequireAddsUp(g);
  REQUIRE(g.wall_seconds() == Approx(15));
  REQUIRE(g.training_seconds() == Approx(14));
  REQUIRE(g.starting_seconds() == Approx(1));
  // Restored while resetting: the gap and what follows is reset until training resumes.
  GoodputLedger resetting;
  resetting.Restore(before, started, /*running=*/false, f.Now());
  resetting.GenerationReady(2, f.Now());
  REQUIRE(resetting.Report(f.Now()).reset_seconds() == Approx(5));
  RequireAddsUp(resetting.Report(f.Now()));
}

TEST_CASE("goodput: random event orders keep the parts adding up") {
  Fixture f;
  f.ledger.Start(f.Now());
  uint32_t seed = 12345;
  const auto next = [&seed] {
    seed = seed * 1103515245 + 12345;
    return (seed >> 16) & 0x7fff;
  };
  int64_t generation = 0;
  for (int i = 0; i < 2000; ++i) {
    f.Advance((next() % 1000) / 500.0);
    switch (next() % 9) {
      case 0:
        f.ledger.BelowMinNp(f.Now());
        break;
      case 1:
        f.ledger.EnoughSlots(f.Now());
        break;
      case 2:
        f.ledger.GenerationReady(++generation, f.Now());
        break;
      case 3:
        f.ledger.Committed(generation, f.Ago((next() % 100) / 50.0));
        break;
      case 4:
        f.ledger.Activity(generation, Report(1, (next() % 100) / 20.0, 0.3), f.Now());
        break;
      case 5:
        f.ledger.Stalled(f.Ago((next() % 100) / 10.0), f.Now());
        break;
      case 6:
        f.ledger.FailureNoticed(f.Ago((next() % 100) / 10.0), f.Now());
        break;
      case 7:
        f.ledger.Interrupted(f.Now());
        break;
      default:
        break;
    }
    RequireAddsUp(f.Goodput());
  }
  f.ledger.End(f.Now());
  RequireAddsUp(f.Goodput());
}

}  // namespace
}  // namespace horovodd::daemon
