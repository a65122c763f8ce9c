// What a rank reports doing (engine_activity.h): the tracker on its own
// (oldest pending collective, counts, step time), and engines over an
// in-process ring recording into it: a rank waiting in an allreduce its peer
// has not submitted shows that allreduce, the peer shows none, and both
// count it once it completes.
#include <string>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "test_collectives_harness.h"
#include "test_engine_support.h"
#include "worker_runtime/engine/engine_activity.h"

namespace horovodd {
namespace {

using internal::ActivitySnapshot;
using internal::ActivityTracker;

TEST_CASE("the tracker reports the oldest pending collective and counts completions",
          "[engine][activity]") {
  ActivityTracker tracker;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ActivitySnapshot idle = tracker.Snapshot();
  CHECK_FALSE(idle.waiting.has_value());
  CHECK(idle.pending == 0);
  CHECK(idle.completed == 0);
  CHECK_FALSE(idle.last_commit_at.has_value());

  tracker.Submitted(0, "horovodd.sync.allreduce.loss", "allreduce", t0 + absl::Seconds(2));
  tracker.Submitted(1, "grad.w1", "broadcast", t0);
  ActivitySnapshot two = tracker.Snapshot();
  REQUIRE(two.waiting.has_value());
  CHECK(two.waiting->name == "grad.w1");
  CHECK(two.waiting->operation == "broadcast");
  CHECK(two.waiting->process_set == 1);
  CHECK(two.waiting->since == t0);
  CHECK(two.pending == 2);

  tracker.Completed(1, "grad.w1", /*ok=*/true, t0 + absl::Seconds(3));
  ActivitySnapshot one = tracker.Snapshot();
  REQUIRE(one.waiting.has_value());
  // A synchronous call's name as the user gave it.
  CHECK(one.waiting->name == "loss");
  CHECK(one.waiting->since == t0 + absl::Seconds(2));
  CHECK(one.completed == 1);

  // A failed collective waits no more but does not count.
  tracker.Completed(0, "horovodd.sync.allreduce.loss", /*ok=*/false, t0 + absl::Seconds(4));
  ActivitySnapshot none = tracker.Snapshot();
  CHECK_FALSE(none.waiting.has_value());
  CHECK(none.pending == 0);
  CHECK(none.completed == 1);

  tracker.NewGeneration();
  CHECK(tracker.Snapshot().completed == 0);
}

TEST_CASE("the tracker's snapshot says which peer the transport waits for, while it waits",
          "[activity]") {
  ActivityTracker tracker;
  CHECK_FALSE(tracker.Snapshot().waiting_on.has_value());
  const absl::Time before = absl::Now();
  tracker.peer_wait()->Enter(3);
  const ActivitySnapshot waiting = tracker.Snapshot();
  REQUIRE(waiting.waiting_on.has_value());
  CHECK(waiting.waiting_on->rank == 3);
  CHECK(waiting.waiting_on->since >= before);
  tracker.peer_wait()->Leave();
  CHECK_FALSE(tracker.Snapshot().waiting_on.has_value());
}

TEST_CASE("the tracker's step time is the mean interval between recent commits",
          "[engine][activity]") {
  ActivityTracker tracker;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  tracker.Committed(1, t0);
  ActivitySnapshot first = tracker.Snapshot();
  CHECK(first.last_commit == 1);
  CHECK(first.last_commit_at == t0);
  CHECK(first.step == absl::ZeroDuration());  // one commit: no interval yet

  tracker.Committed(2, t0 + absl::Seconds(2));
  tracker.Committed(3, t0 + absl::Seconds(6));
  CHECK(tracker.Snapshot().step == absl::Seconds(3));

  // Only the last kStepWindow intervals count.
  absl::Time t = t0 + absl::Seconds(6);
  for (int i = 0; i < static_cast<int>(ActivityTracker::kStepWindow); ++i) {
    t += absl::Seconds(1);
    tracker.Committed(4 + i, t);
  }
  CHECK(tracker.Snapshot().step == absl::Seconds(1));

  // A new generation starts the intervals over, but keeps the last commit.
  tracker.NewGeneration();
  ActivitySnapshot after = tracker.Snapshot();
  CHECK(after.step == absl::ZeroDuration());
  CHECK(after.last_commit == 3 + static_cast<int64_t>(ActivityTracker::kStepWindow));
}

TEST_CASE("the tracker's step wait is the time per step with a collective pending",
          "[engine][activity]") {
  ActivityTracker tracker;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  tracker.Committed(1, t0);
  // Step 1 (2 s): two overlapping collectives pending from 0.5 s to 1.5 s.
  tracker.Submitted(0, "a", "allreduce", t0 + absl::Milliseconds(500));
  tracker.Submitted(0, "b", "allreduce", t0 + absl::Milliseconds(700));
  tracker.Completed(0, "a", true, t0 + absl::Milliseconds(1200));
  tracker.Completed(0, "b", true, t0 + absl::Milliseconds(1500));
  tracker.Committed(2, t0 + absl::Seconds(2));
  ActivitySnapshot one = tracker.Snapshot();
  CHECK(one.step == absl::Seconds(2));
  CHECK(one.step_wait == absl::Seconds(1));
  // Step 2 (2 s): one pending from 3.5 s across the commit at 4 s.
  tracker.Submitted(0, "c", "allreduce", t0 + absl::Milliseconds(3500));
  tracker.Committed(3, t0 + absl::Seconds(4));
  CHECK(tracker.Snapshot().step_wait == absl::Milliseconds(750));
  tracker.Completed(0, "c", true, t0 + absl::Milliseconds(4500));
  tracker.Committed(4, t0 + absl::Seconds(6));
  // Over three steps: 1 s + 0.5 s + 0.5 s (a mean: equal to within rounding).
  CHECK(absl::AbsDuration(tracker.Snapshot().step_wait - absl::Seconds(2) / 3) <
        absl::Microseconds(1));
}

TEST_CASE("engines report the allreduce a rank waits in until its peer submits it",
          "[engine][activity]") {
  testing::EngineGroup group(2);
  Tensor t0 = testing::MakeTensor(DType::kFloat32, {4}, [](int64_t) { return 1.0; });
  Tensor t1 = testing::MakeTensor(DType::kFloat32, {4}, [](int64_t) { return 2.0; });
  const absl::Time before = absl::Now();
  absl::StatusOr<Handle> h0 =
      group.engine(0).Enqueue(testing::AllreduceRequest("grad.late", {t0.view()}), false);
  REQUIRE(h0.ok());

  // Rank 0 waits (its engine retries the negotiation every cycle); rank 1
  // has submitted nothing.
  for (int i = 0; i < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    ActivitySnapshot waiting = group.activity(0).Snapshot();
    REQUIRE(waiting.waiting.has_value());
    CHECK(waiting.waiting->name == "grad.late");
    CHECK(waiting.waiting->operation == "allreduce");
    CHECK(waiting.waiting->process_set == 0);
    CHECK(waiting.waiting->since >= before);
    CHECK(waiting.waiting->since <= absl::Now());
    CHECK(waiting.completed == 0);
    ActivitySnapshot peer = group.activity(1).Snapshot();
    CHECK_FALSE(peer.waiting.has_value());
    CHECK(peer.pending == 0);
  }

  absl::StatusOr<Handle> h1 =
      group.engine(1).Enqueue(testing::AllreduceRequest("grad.late", {t1.view()}), false);
  REQUIRE(h1.ok());
  REQUIRE(h0->Wait(absl::Seconds(120)).ok());
  REQUIRE(h1->Wait(absl::Seconds(120)).ok());
  for (int rank = 0; rank < 2; ++rank) {
    ActivitySnapshot done = group.activity(rank).Snapshot();
    CHECK_FALSE(done.waiting.has_value());
    CHECK(done.pending == 0);
    CHECK(done.completed == 1);
  }
}

}  // namespace
}  // namespace horovodd
