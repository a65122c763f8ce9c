// The stall detector (daemon/stall/stall_detector.h) on a simulated clock:
// reports are built by hand and time is an argument. A rank missing from a
// collective the others wait in is named within the check period after the
// warning time, never before; a link whose ends every rank reports is named
// by them; the list is never empty; the stall is acted on once past the act
// time and cleared when the wait ends; stragglers are measured and evicted
// only when asked, after a sustained window. And the settings a job gets.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/stall/stall_detector.h"
#include "daemon/stall/stall_settings.h"

namespace horovodd::daemon {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

StallSettings Settings(absl::Duration warning, absl::Duration act_after) {
  StallSettings s;
  s.warning = warning;
  s.act_after = act_after;
  return s;
}

// What a job of `n` ranks last reported; each call to At() re-dates them as
// reports just received (heartbeats keep coming).
class Reports {
 public:
  explicit Reports(int n) : activity_(n) {
    for (int r = 0; r < n; ++r) {
      activity_[r].set_since_commit_seconds(-1);
      waiting_since_[r] = absl::InfinitePast();
      worker_ids_[r] = WorkerOf(r);
    }
  }
  // Rank r's worker id, unless renumbered: 10 + r.
  static int64_t WorkerOf(int rank) { return 10 + rank; }
  // Another process now holds `rank` (a new generation renumbered the ranks).
  void Renumber(int rank, int64_t worker_id) { worker_ids_[rank] = worker_id; }
  void Wait(int rank, const std::string& name, absl::Time since,
            const std::string& operation = "allreduce") {
    waiting_since_[rank] = since;
    names_[rank] = name;
    operations_[rank] = operation;
  }
  void Done(int rank) { waiting_since_[rank] = absl::InfinitePast(); }
  // Its transport waits for `peer`'s data since `since` (its clock is ours).
  void WaitOn(int rank, int peer, absl::Time since) {
    activity_[rank].clear_waiting_on_ranks();
    activity_[rank].add_waiting_on_ranks(peer);
    peer_since_[rank] = since;
  }
  v1::WorkerActivity& activity(int rank) { return activity_[rank]; }
  std::vector<RankReport> At(absl::Time now) {
    std::vector<RankReport> out;
    for (int r = 0; r < static_cast<int>(activity_.size()); ++r) {
      v1::WorkerActivity& a = activity_[r];
      if (waiting_since_[r] == absl::InfinitePast()) {
        a.clear_waiting();
      } else {
        a.mutable_waiting()->set_name(names_[r]);
        a.mutable_waiting()->set_operation(operations_[r]);
        a.mutable_waiting()->set_waited_seconds(absl::ToDoubleSeconds(now - waiting_since_[r]));
      }
      if (auto it = peer_since_.find(r); it != peer_since_.end()) {
        a.set_waiting_on_seconds(absl::ToDoubleSeconds(now - it->second));
      }
      RankReport report;
      report.rank = r;
      report.worker_id = worker_ids_[r];
      report.host = r < 2 ? "a" : "b";
      report.pid = 100 + r;
      report.activity = &a;
      report.reported_at = now;
      out.push_back(report);
    }
    return out;
  }

 private:
  std::vector<v1::WorkerActivity> activity_;
  std::map<int, absl::Time> waiting_since_;
  std::map<int, std::string> names_;
  std::map<int, std::string> operations_;
  std::map<int, absl::Time> peer_since_;
  std::map<int, int64_t> worker_ids_;
};

std::vector<int> CulpritRanks(const v1::StallReport& report) {
  std::vector<int> ranks;
  for (const auto& c : report.culprits()) ranks.push_back(c.rank());
  return ranks;
}

TEST_CASE("a rank missing from a collective is named just after the warning time", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(5), absl::Seconds(10)), /*elastic=*/true);
  detector.NewGeneration(kT0);
  Reports reports(4);
  reports.activity(1).set_last_commit(7);
  reports.activity(1).set_since_commit_seconds(0.5);
  reports.activity(1).set_completed(42);
  const absl::Time since = kT0 + absl::Seconds(3);
  for (int r : {0, 2, 3}) reports.Wait(r, "grad.w", since);

  // Check at the detector's period, as its timer would.
  std::optional<v1::StallReport> named;
  absl::Time named_at;
  for (absl::Time now = kT0; now < kT0 + absl::Seconds(20); now += detector.period()) {
    StallDetector::Verdict v = detector.Check(now, reports.At(now));
    CHECK_FALSE(v.act.has_value());
    if (v.named.has_value()) {
      named = v.named;
      named_at = now;
      break;
    }
  }
  REQUIRE(named.has_value());
  CHECK(named_at >= since + absl::Seconds(5));
  CHECK(named_at <= since + absl::Seconds(5) + detector.period());
  CHECK(detector.period() <= absl::Milliseconds(500));
  CHECK(named->kind() == "missing");
  CHECK(CulpritRanks(*named) == std::vector<int>{1});
  const v1::StallCulprit& c = named->culprits(0);
  CHECK(c.host() == "a");
  CHECK(c.pid() == 101);
  CHECK(c.worker_id() == 11);
  CHECK(c.last_commit() == 7);
  CHECK(c.last_did().find("commit 7") != std::string::npos);
  CHECK(c.last_did().find("42 collective") != std::string::npos);
  CHECK(named->collective().name() == "grad.w");
  CHECK(named->waiting_ranks_size() == 3);
  CHECK(named->collective().since_unix() ==
        Approx(absl::ToDoubleSeconds(since - absl::UnixEpoch())));
  CHECK(named->evict_unix() ==
        Approx(absl::ToDoubleSeconds(since + absl::Seconds(10) - absl::UnixEpoch())));
  REQUIRE(detector.current().has_value());

  // Not named twice; acted on once past the act time.
  absl::Time now = named_at + detector.period();
  CHECK_FALSE(detector.Check(now, reports.At(now)).named.has_value());
  now = since + absl::Seconds(10);
  StallDetector::Verdict act = detector.Check(now, reports.At(now));
  REQUIRE(act.act.has_value());
  CHECK(CulpritRanks(*act.act) == std::vector<int>{1});
  now += detector.period();
  CHECK_FALSE(detector.Check(now, reports.At(now)).act.has_value());

  // The wait ends: the stall is cleared.
  for (int r : {0, 2, 3}) reports.Done(r);
  now += detector.period();
  StallDetector::Verdict cleared = detector.Check(now, reports.At(now));
  CHECK(cleared.cleared.has_value());
  CHECK_FALSE(detector.current().has_value());
}

TEST_CASE("a step under the warning time is no stall", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(5), absl::Seconds(10)), true);
  detector.NewGeneration(kT0);
  Reports reports(3);
  // Each step, ranks 0 and 2 wait 4.5 s for rank 1.
  for (int step = 0; step < 5; ++step) {
    const absl::Time start = kT0 + absl::Seconds(5 * step);
    for (int r : {0, 2}) reports.Wait(r, "grad", start);
    for (absl::Time now = start; now < start + absl::Milliseconds(4500); now += detector.period()) {
      StallDetector::Verdict v = detector.Check(now, reports.At(now));
      CHECK_FALSE(v.named.has_value());
      CHECK_FALSE(v.act.has_value());
    }
    for (int r : {0, 2}) reports.Done(r);
  }
}

TEST_CASE("a stale report is not judged until a fresh one says", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(4), absl::InfiniteDuration()), false);
  detector.NewGeneration(kT0);
  Reports reports(2);
  const absl::Time since = kT0 + absl::Seconds(1);
  reports.Wait(0, "x", since);
  std::vector<RankReport> now_reports = reports.At(since + absl::Seconds(5));
  now_reports[1].reported_at = since + absl::Milliseconds(100);  // from before the wait
  bool undecided = !detector.Check(since + absl::Seconds(5), now_reports).named.has_value();
  CHECK(undecided);
  StallDetector::Verdict v =
      detector.Check(since + absl::Seconds(5), reports.At(since + absl::Seconds(5)));
  REQUIRE(v.named.has_value());
  CHECK(CulpritRanks(*v.named) == std::vector<int>{1});
  // A fixed-size job without a shutdown time: named, never acted on.
  CHECK(v.named->evict_unix() == 0);
  CHECK_FALSE(detector.Check(since + absl::Hours(1), reports.At(since + absl::Hours(1))).act);
}

TEST_CASE("waits from the generation before are not judged", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  Reports reports(2);
  reports.Wait(0, "x", kT0);
  detector.NewGeneration(kT0 + absl::Seconds(10));
  const absl::Time now = kT0 + absl::Seconds(11);
  CHECK_FALSE(detector.Check(now, reports.At(now)).named.has_value());
}

TEST_CASE("when every rank submitted, a link is named by its two ends", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(4);
  for (int r = 0; r < 4; ++r) reports.Wait(r, "grad", kT0 + absl::Seconds(1));
  reports.activity(2).add_waiting_on_ranks(1);
  const absl::Time now = kT0 + absl::Seconds(3) + absl::Milliseconds(1);
  StallDetector::Verdict v = detector.Check(now, reports.At(now));
  REQUIRE(v.named.has_value());
  CHECK(v.named->kind() == "link");
  CHECK(CulpritRanks(*v.named) == std::vector<int>{1, 2});
  CHECK(v.named->culprits(0).peer() == 2);
  CHECK(v.named->culprits(1).peer() == 1);
}

TEST_CASE("a stalled link is named by the oldest wait's two ends, awaited end marked", "[stall]") {
  // The ring 0 -> 1 -> 2 -> 3 -> 0 stalls between 1 and 2: rank 2 waits for
  // rank 1's data first; the others then wait, each for the rank before it.
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(4);
  const absl::Time since = kT0 + absl::Seconds(1);
  for (int r = 0; r < 4; ++r) reports.Wait(r, "grad", since);
  reports.WaitOn(2, 1, since + absl::Milliseconds(100));
  reports.WaitOn(3, 2, since + absl::Milliseconds(300));
  reports.WaitOn(0, 3, since + absl::Milliseconds(400));
  reports.WaitOn(1, 0, since + absl::Milliseconds(500));
  // The collective's wait is past the warning time; the oldest wait for a
  // peer is not yet: its transfers may still move.
  absl::Time now = since + absl::Seconds(2) + absl::Milliseconds(50);
  CHECK_FALSE(detector.Check(now, reports.At(now)).named.has_value());
  now = since + absl::Seconds(2) + absl::Milliseconds(150);
  StallDetector::Verdict v = detector.Check(now, reports.At(now));
  REQUIRE(v.named.has_value());
  CHECK(v.named->kind() == "link");
  REQUIRE(CulpritRanks(*v.named) == std::vector<int>{1, 2});
  const v1::StallCulprit& sender = v.named->culprits(0);
  const v1::StallCulprit& waiter = v.named->culprits(1);
  CHECK(sender.awaited());
  CHECK(sender.peer() == 2);
  CHECK(sender.host() == "a");
  CHECK(sender.pid() == 101);
  CHECK_FALSE(waiter.awaited());
  CHECK(waiter.peer() == 1);
  CHECK(waiter.host() == "b");
  CHECK(waiter.pid() == 102);
  CHECK(waiter.last_did().find("for rank 1's data") != std::string::npos);
  CHECK(v.named->waiting_ranks_size() == 4);
  CHECK_FALSE(v.act.has_value());
  // Past the act time it is acted on once, still the same two ends.
  now = since + absl::Seconds(4);
  v = detector.Check(now, reports.At(now));
  REQUIRE(v.act.has_value());
  CHECK(v.act->kind() == "link");
  CHECK(CulpritRanks(*v.act) == std::vector<int>{1, 2});
  CHECK_FALSE(detector.Check(now + absl::Seconds(1), reports.At(now + absl::Seconds(1))).act);
}

TEST_CASE("a link stalled one way is named, though its sender went on to the next collective",
          "[stall]") {
  // Rank 1's packets to rank 0 are lost: rank 1 received rank 0's data,
  // completed "grad" and waits in "next" for rank 0, which still waits in
  // "grad" for rank 1's data. Rank 1 is not missing: the link is.
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(2);
  const absl::Time since = kT0 + absl::Seconds(1);
  reports.Wait(0, "grad", since);
  reports.WaitOn(0, 1, since + absl::Milliseconds(10));
  reports.Wait(1, "next", since + absl::Milliseconds(20), "allgather");
  reports.WaitOn(1, 0, since + absl::Milliseconds(30));
  absl::Time now = since + absl::Seconds(2) + absl::Milliseconds(100);
  StallDetector::Verdict v = detector.Check(now, reports.At(now));
  REQUIRE(v.named.has_value());
  CHECK(v.named->kind() == "link");
  REQUIRE(CulpritRanks(*v.named) == std::vector<int>{0, 1});
  CHECK_FALSE(v.named->culprits(0).awaited());
  CHECK(v.named->culprits(0).peer() == 1);
  CHECK(v.named->culprits(1).awaited());
  CHECK(v.named->culprits(1).peer() == 0);
  CHECK(v.named->waiting_ranks_size() == 1);
  CHECK(v.named->collective().name() == "grad");
  // A rank that is only somewhere else (waiting for nobody) is missing, as before.
  StallDetector other(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  other.NewGeneration(kT0);
  Reports elsewhere(2);
  elsewhere.Wait(0, "grad", since);
  elsewhere.WaitOn(0, 1, since + absl::Milliseconds(10));
  elsewhere.Wait(1, "next", since + absl::Milliseconds(20), "allgather");
  v = other.Check(now, elsewhere.At(now));
  REQUIRE(v.named.has_value());
  CHECK(v.named->kind() == "missing");
  CHECK(CulpritRanks(*v.named) == std::vector<int>{1});
}

TEST_CASE("a link whose transfers still move is no stall", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(2);
  const absl::Time since = kT0 + absl::Seconds(1);
  for (int r = 0; r < 2; ++r) reports.Wait(r, "big", since);
  // A large collective: each wait for a peer's part ends within a second.
  for (int s = 0; s < 10; ++s) {
    const absl::Time now = since + absl::Seconds(2 + s);
    reports.WaitOn(0, 1, now - absl::Milliseconds(300));
    reports.WaitOn(1, 0, now - absl::Milliseconds(600));
    StallDetector::Verdict v = detector.Check(now, reports.At(now));
    CHECK_FALSE(v.named.has_value());
    CHECK_FALSE(v.act.has_value());
  }
}

TEST_CASE("when every rank submitted and none says why, all are named", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(3);
  for (int r = 0; r < 3; ++r) reports.Wait(r, "grad", kT0 + absl::Seconds(1));
  const absl::Time now = kT0 + absl::Seconds(3) + absl::Milliseconds(1);
  StallDetector::Verdict v = detector.Check(now, reports.At(now));
  REQUIRE(v.named.has_value());
  CHECK(v.named->kind() == "unknown");
  CHECK(CulpritRanks(*v.named) == std::vector<int>{0, 1, 2});
}

TEST_CASE("a rank that joined waits by design", "[stall]") {
  StallDetector detector(Settings(absl::Seconds(2), absl::Seconds(4)), true);
  detector.NewGeneration(kT0);
  Reports reports(2);
  reports.Wait(0, "join", kT0, "join");
  const absl::Time now = kT0 + absl::Seconds(30);
  CHECK_FALSE(detector.Check(now, reports.At(now)).named.has_value());
}

TEST_CASE("the stall check off names nothing", "[stall]") {
  StallSettings s = Settings(absl::Seconds(2), absl::Seconds(4));
  s.enabled = false;
  StallDetector detector(s, true);
  detector.NewGeneration(kT0);
  Reports reports(2);
  reports.Wait(0, "x", kT0);
  const absl::Time now = kT0 + absl::Seconds(30);
  StallDetector::Verdict v = detector.Check(now, reports.At(now));
  CHECK_FALSE(v.named.has_value());
  CHECK_FALSE(v.act.has_value());
}

void Steps(Reports& reports, int rank, double step, double wait) {
  reports.activity(rank).set_step_seconds(step);
  reports.activity(rank).set_step_wait_seconds(wait);
}

// An elastic job's detector, in a generation that began at kT0, evicting
// stragglers above `factor` (0: none).
StallDetector StragglerDetector(double factor) {
  StallSettings s = Settings(absl::Seconds(60), absl::Minutes(5));
  s.evict_stragglers = factor;
  StallDetector detector(s, /*elastic=*/true);
  detector.NewGeneration(kT0);
  return detector;
}

// Ranks 0 and 1 compute 0.1 s a step and wait 0.4 s for rank 2, which computes 0.5 s.
void Rank2Slow(Reports& reports) {
  for (int r : {0, 1}) Steps(reports, r, 0.5, 0.4);
  Steps(reports, 2, 0.5, 0.0);
}

// The stragglers Check hands back for eviction, run every period from `now`
// until `until` (where `now` ends), and when it handed back the first.
struct Evictions {
  std::vector<v1::StallCulprit> culprits;
  absl::Time first;
};
Evictions CheckUntil(StallDetector& detector, Reports& reports, absl::Time& now, absl::Time until) {
  Evictions out;
  for (; now < until; now += detector.period()) {
    StallDetector::Verdict v = detector.Check(now, reports.At(now));
    if (!v.evict_stragglers.empty() && out.culprits.empty()) out.first = now;
    for (auto& c : v.evict_stragglers) out.culprits.push_back(c);
  }
  return out;
}

TEST_CASE("a straggler is measured, and evicted only when asked after a window", "[stall]") {
  for (double factor : {0.0, 3.0}) {
    StallDetector detector = StragglerDetector(factor);
    Reports reports(4);
    // Rank 2 computes 0.5 s a step, the others 0.1 s and wait 0.4 s for it.
    for (int r : {0, 1, 3}) Steps(reports, r, 0.5, 0.4);
    Steps(reports, 2, 0.5, 0.0);
    absl::Time now = kT0;
    const Evictions evictions = CheckUntil(detector, reports, now, kT0 + absl::Seconds(30));
    const std::vector<v1::StallCulprit>& evicted = evictions.culprits;
    const absl::Time evicted_at = evictions.first;
    const auto& straggling = detector.straggling();  // by worker id
    REQUIRE(straggling.count(Reports::WorkerOf(2)) == 1);
    CHECK(straggling.at(Reports::WorkerOf(2)).straggler);
    CHECK(straggling.at(Reports::WorkerOf(2)).lost_seconds_per_step == Approx(0.4));
    CHECK_FALSE(straggling.at(Reports::WorkerOf(0)).straggler);
    CHECK(straggling.at(Reports::WorkerOf(0)).lost_seconds_per_step == Approx(0.0));
    if (factor == 0) {
      CHECK(evicted.empty());
    } else {
      REQUIRE(evicted.size() == 1);  // once
      CHECK(evicted[0].rank() == 2);
      CHECK(evicted_at - kT0 >= StallDetector::kStragglerWindow);
      CHECK(evicted_at - kT0 <= StallDetector::kStragglerWindow + detector.period());
    }
  }
}

TEST_CASE("a rank slower for a moment is not evicted", "[stall]") {
  StallDetector detector = StragglerDetector(2);
  Reports reports(3);
  Rank2Slow(reports);
  absl::Time now = kT0;
  CHECK(CheckUntil(detector, reports, now, kT0 + absl::Seconds(8)).culprits.empty());
  // It catches up: the window starts over.
  for (int r : {0, 1, 2}) Steps(reports, r, 0.2, 0.05);
  CHECK(detector.Check(now, reports.At(now)).evict_stragglers.empty());
  CHECK_FALSE(detector.straggling().at(Reports::WorkerOf(2)).straggler);
  Rank2Slow(reports);
  const absl::Time restart = now;
  CHECK(CheckUntil(detector, reports, now, restart + absl::Seconds(8)).culprits.empty());
}

TEST_CASE("a renumbered rank is not evicted for another process's slowness", "[stall]") {
  StallDetector detector = StragglerDetector(2);
  Reports reports(3);
  Rank2Slow(reports);
  // Worker 12, rank 2, is slow for most of a window.
  absl::Time now = kT0;
  CHECK(CheckUntil(detector, reports, now, kT0 + absl::Seconds(8)).culprits.empty());
  REQUIRE(detector.straggling().at(12).straggler);
  // Worker 13 takes rank 2, as slow. Its own window starts now: worker 12's
  // eight seconds are not held against it.
  reports.Renumber(2, 13);
  const absl::Time renumbered = now;
  const Evictions evicted = CheckUntil(detector, reports, now, renumbered + absl::Seconds(12));
  CHECK(detector.straggling().count(12) == 0);
  CHECK(detector.straggling().at(13).straggler);
  REQUIRE(evicted.culprits.size() == 1);
  CHECK(evicted.culprits[0].worker_id() == 13);
  CHECK(evicted.culprits[0].rank() == 2);
  CHECK(evicted.first - renumbered >= StallDetector::kStragglerWindow);
}

TEST_CASE("a job's stall settings come from its workers' variables", "[stall]") {
  v1::JobSpec spec;
  spec.set_elastic(true);
  auto none = [](const char*) -> const char* { return nullptr; };
  StallSettings defaults = StallSettings::ForJob(spec, none);
  CHECK(defaults.enabled);
  CHECK(defaults.warning == absl::Seconds(60));
  CHECK(defaults.act_after == StallSettings::kDefaultElasticEviction);

  (*spec.mutable_env())["HOROVOD_STALL_CHECK_TIME_SECONDS"] = "5";
  (*spec.mutable_env())["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "10";
  StallSettings set = StallSettings::ForJob(spec, none);
  CHECK(set.warning == absl::Seconds(5));
  CHECK(set.act_after == absl::Seconds(10));

  // A shutdown time under the warning time acts at the warning time.
  (*spec.mutable_env())["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "2";
  CHECK(StallSettings::ForJob(spec, none).act_after == absl::Seconds(5));

  // Fixed size without a shutdown time: never acted on.
  spec.mutable_env()->erase("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  spec.set_elastic(false);
  CHECK(StallSettings::ForJob(spec, none).act_after == absl::InfiniteDuration());

  // The daemon's own environment, which its workers inherit, when the spec says nothing.
  v1::JobSpec bare;
  auto daemon_env = [](const char* name) -> const char* {
    return std::string(name) == "HOROVOD_STALL_CHECK_TIME_SECONDS" ? "7" : nullptr;
  };
  CHECK(StallSettings::ForJob(bare, daemon_env).warning == absl::Seconds(7));
  (*bare.mutable_env())["HOROVOD_STALL_CHECK_DISABLE"] = "1";
  CHECK_FALSE(StallSettings::ForJob(bare, daemon_env).enabled);
}

}  // namespace
}  // namespace horovodd::daemon
