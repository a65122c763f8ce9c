// Elastic state against workers run as threads with a fake daemon
// (fake_daemon.h): saving and restoring, syncing from one root, the choice
// of that root after a reset, host-update interrupts, and elastic::Run
// rebuilding the job after each kind of disturbance.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fake_daemon.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd {
namespace {

using testing::FakeDaemon;
using testing::RequireAllOk;
using testing::Runtime;
using testing::RunWorkers;
using testing::WaitUntil;

TEST_CASE("BufferState restores the values saved at the last commit") {
  std::vector<float> weights = {1, 2, 3};
  std::vector<double> moments = {0.5};
  int64_t epoch = 4;
  elastic::BufferState state;
  state.AddBuffer("weights", &weights);
  state.AddBuffer("moments", &moments);
  state.AddValue("epoch", &epoch);
  state.Save();
  weights = {9, 9, 9, 9};
  moments[0] = -1;
  epoch = 7;
  state.Restore();
  CHECK(weights == std::vector<float>{1, 2, 3});
  CHECK(moments == std::vector<double>{0.5});
  CHECK(epoch == 4);
}

TEST_CASE("IsHostsUpdated tells a host update from other ABORTED statuses") {
  absl::Status update = elastic::HostsUpdatedError(3, 5);
  CHECK(update.code() == absl::StatusCode::kAborted);
  CHECK(update.message().find("generation 5") != std::string::npos);
  CHECK(elastic::IsHostsUpdated(update));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::AbortedError("hosts updated")));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::UnavailableError("peer lost")));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::OkStatus()));
}

TEST_CASE("Workers sync a BufferState from one root") {
  FakeDaemon daemon(3);
  std::vector<std::vector<float>> seen(3);
  std::vector<int64_t> seen_steps(3);
  auto results = RunWorkers(daemon, 3, [&](int w, Runtime&) -> absl::Status {
    std::vector<float> weights(4, static_cast<float>(Rank()));
    int64_t step = 100 + Rank();
    elastic::BufferState state;
    state.AddBuffer("weights", &weights);
    state.AddValue("step", &step);
    absl::Status status = state.Sync(/*root=*/1);
    seen[w] = weights;
    seen_steps[w] = step;
    return status;
  });
  RequireAllOk(results);
  for (int w = 0; w < 3; ++w) {
    CHECK(seen[w] == std::vector<float>(4, 1.0f));
    CHECK(seen_steps[w] == 101);
  }
}

// Run's sync after a reset, reachable from a test.
class ExposedBufferState : public elastic::BufferState {
 public:
  using elastic::BufferState::SyncFromNewest;
};

// A state that only has State's own SyncFromNewest (a collective to choose
// the root, then Sync), over one value.
class OneValueState : public elastic::State {
 public:
  explicit OneValueState(int64_t* value) : value_(value) {}
  using elastic::State::SyncFromNewest;
  void Save() override {}
  void Restore() override {}
  absl::Status Sync(int root) override {
    std::vector<int64_t> v = {*value_};
    if (absl::Status s = Broadcast(ViewOf(v), root); !s.ok()) return s;
    *value_ = v[0];
    return absl::OkStatus();
  }

 private:
  int64_t* value_;
};

TEST_CASE("After a reset the state comes from the lowest rank with the most commits") {
  const bool folded = GENERATE(true, false);  // BufferState's own choice, or State's
  FakeDaemon daemon(4);
  const std::vector<int64_t> commits = {2, 5, 5, 0};
  std::vector<int64_t> seen_values(4), seen_newest(4);
  auto results = RunWorkers(daemon, 4, [&](int w, Runtime&) -> absl::Status {
    int64_t value = 1000 + Rank();
    absl::StatusOr<int64_t> newest;
    if (folded) {
      ExposedBufferState state;
      state.AddValue("value", &value);
      newest = state.SyncFromNewest(commits[Rank()]);
    } else {
      OneValueState state(&value);
      newest = state.SyncFromNewest(commits[Rank()]);
    }
    if (!newest.ok()) return newest.status();
    seen_values[w] = value;
    seen_newest[w] = *newest;
    return absl::OkStatus();
  });
  RequireAllOk(results);
  for (int w = 0; w < 4; ++w) {
    CHECK(seen_values[w] == 1001);  // rank 1: 5 commits, the lower of the two
    CHECK(seen_newest[w] == 5);
  }
}

TEST_CASE("Sync refuses buffers whose lengths differ across ranks, on every rank") {
  FakeDaemon daemon(2);
  auto results = RunWorkers(daemon, 2, [&](int, Runtime&) -> absl::Status {
    std::vector<double> weights(Rank() == 0 ? 3 : 5, 1.0);
    elastic::BufferState state;
    state.AddBuffer("weights", &weights);
    return state.Sync(0);
  });
  for (const auto& status : results) {
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find("'weights'") != std::string::npos);
    CHECK(status.message().find("3 to 5") != std::string::npos);
  }
}

TEST_CASE("CheckHostUpdates interrupts every rank when one heard of a new generation") {
  FakeDaemon daemon(3);
  auto results = RunWorkers(daemon, 3, [&](int w, Runtime& runtime) -> absl::Status {
    elastic::BufferState state;
    if (absl::Status first = state.CheckHostUpdates(); !first.ok()) return first;
    if (w == 0) {
      daemon.WaitAttached(3);
      daemon.Announce(0, 2, /*abort=*/false);
      if (!WaitUntil([&] { return runtime.newest_generation() == 2; })) {
        return absl::DeadlineExceededError("announcement not heard");
      }
    }
    absl::Status second = state.CheckHostUpdates();
    return elastic::IsHostsUpdated(second) ? absl::OkStatus() : second;
  });
  RequireAllOk(results);
}

// How rank 0 disturbs the first pass of TrainSteps.
enum class Disturbance {
  kHostsUpdated,  // the daemon announces a new generation
  kDaemonAbort,   // the daemon aborts the generation
  kLostPeer,      // rank 0's ring breaks; only its failure report tells the daemon
};

absl::Status Disturb(Disturbance disturbance, FakeDaemon& daemon, Runtime& runtime) {
  if (disturbance == Disturbance::kLostPeer) {
    return runtime.RunCollective([](internal::Communicator& comm) {
      comm.Abort();
      return absl::OkStatus();
    });
  }
  daemon.WaitAttached(2);
  daemon.NewGeneration(disturbance == Disturbance::kDaemonAbort);
  return WaitUntil([&] { return runtime.newest_generation() == 2; })
             ? absl::OkStatus()
             : absl::DeadlineExceededError("generation 2 not heard");
}

struct TrainOutcome {
  absl::Status status;
  int resets = 0;
  int callbacks = 0;
  int64_t total = 0;
  int64_t generation = 0;
};

// total += the sum over ranks of 1.
absl::Status AddOnePerRank(std::vector<double>& total) {
  std::vector<double> one = {1};
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  if (absl::Status status = Allreduce(ViewOf(one), sum); !status.ok()) return status;
  total[0] += one[0];
  return absl::OkStatus();
}

// Trains `steps` steps inside elastic::Run; each step adds one per rank to
// the total twice, then commits. Rank 0 disturbs the first pass between the
// two halves of step 3, so a failure there must undo the first half.
TrainOutcome TrainSteps(int steps, Disturbance disturbance, FakeDaemon& daemon, Runtime& runtime) {
  TrainOutcome outcome;
  std::vector<double> total = {0};
  int64_t step = 0;
  elastic::BufferState state;
  state.AddBuffer("total", &total);
  state.AddValue("step", &step);
  state.RegisterResetCallback([&] { ++outcome.callbacks; });
  outcome.status = elastic::Run(state, [&](elastic::State& s) -> absl::Status {
    while (step < steps) {
      if (absl::Status st = AddOnePerRank(total); !st.ok()) return st;
      if (step == 3 && s.resets() == 0 && Rank() == 0) {
        if (absl::Status st = Disturb(disturbance, daemon, runtime); !st.ok()) return st;
      }
      if (absl::Status st = AddOnePerRank(total); !st.ok()) return st;
      ++step;  // before Commit, so a restore never repeats a committed step
      if (absl::Status st = s.Commit(); !st.ok()) return st;
    }
    return absl::OkStatus();
  });
  outcome.resets = state.resets();
  outcome.total = static_cast<int64_t>(total[0]);
  outcome.generation = runtime.generation();
  return outcome;
}

TEST_CASE("elastic::Run rebuilds the job and resumes from the right state") {
  const Disturbance disturbance =
      GENERATE(Disturbance::kHostsUpdated, Disturbance::kDaemonAbort, Disturbance::kLostPeer);
  FakeDaemon daemon(2);
  std::vector<TrainOutcome> outcomes(2);
  RequireAllOk(RunWorkers(daemon, 2, [&](int w, Runtime& runtime) {
    outcomes[w] = TrainSteps(6, disturbance, daemon, runtime);
    return outcomes[w].status;
  }));
  for (int w = 0; w < 2; ++w) {
    CHECK(outcomes[w].resets == 1);
    CHECK(outcomes[w].callbacks == 1);
    CHECK(outcomes[w].generation == 2);
    // Every step added 2 + 2 exactly once to the final total.
    CHECK(outcomes[w].total == 24);
    CHECK(WaitUntil([&] { return daemon.last_commit(w) == 6; }));
  }
  if (disturbance == Disturbance::kLostPeer) CHECK(daemon.failures() >= 1);
}

}  // namespace
}  // namespace horovodd
