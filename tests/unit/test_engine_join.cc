// The engine's join (joined ranks answer with zeros, an average still
// divides by every rank, as in Horovod; join returns the last rank to join),
// its stall check, and its timeline, over in-process rings.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "child_stderr.h"
#include "test_collectives_harness.h"
#include "test_engine_support.h"
#include "worker_runtime/engine/engine_stall.h"
#include "worker_runtime/engine/engine_timeline.h"
#include "worker_runtime/gloo/gloo_communicator.h"

namespace horovodd {
namespace {

using testing::EngineGroup;
using testing::OnEveryRank;

internal::Request JoinRequest() {
  internal::Request r;
  r.name = internal::kJoinRequestName;
  r.kind = internal::RequestKind::kJoin;
  r.produces_output = true;
  r.descriptor = internal::Describe(r).Encode();
  return r;
}

absl::StatusOr<int> Join(internal::Engine& engine) {
  absl::StatusOr<Handle> handle = engine.Enqueue(JoinRequest(), /*urgent=*/true);
  if (!handle.ok()) return handle.status();
  absl::StatusOr<Tensor> last = handle->TakeOutput();
  if (!last.ok()) return last.status();
  return *last->data_as<int32_t>();
}

absl::Status Allreduce(internal::Engine& engine, const std::string& name, TensorView view,
                       ReduceOp op) {
  AllreduceOptions options;
  options.op = op;
  absl::StatusOr<Handle> h =
      engine.Enqueue(testing::AllreduceRequest(name, {view}, options), /*urgent=*/true);
  return h.ok() ? h->Wait(absl::Seconds(120)) : h.status();
}

// Rank r runs steps[r] rounds of a Sum, an Average (float64) and an int32
// Average, then joins; returns per rank "" or what went wrong, and the rank
// join returned.
struct JoinOutcome {
  std::string problem;
  int last = -1;
};

std::vector<JoinOutcome> RunUntilJoined(EngineGroup& group, const std::vector<int>& steps) {
  const int size = group.size();
  return OnEveryRank<JoinOutcome>(size, [&](int rank) -> JoinOutcome {
    internal::Engine& engine = group.engine(rank);
    for (int step = 0; step < steps[rank]; ++step) {
      int contributors = 0;
      double sum = 0;
      for (int r = 0; r < size; ++r) {
        if (steps[r] > step) {
          ++contributors;
          sum += r + 1;
        }
      }
      std::vector<float> total = {static_cast<float>(rank + 1), 1.0f};
      if (absl::Status s = Allreduce(engine, "loss", ViewOf(total), ReduceOp::kSum); !s.ok()) {
        return {s.ToString()};
      }
      if (total != std::vector<float>{static_cast<float>(sum), static_cast<float>(contributors)}) {
        return {absl::StrCat("step ", step, ": sum ", total[0], ", ", total[1])};
      }
      std::vector<double> mean = {static_cast<double>(rank + 1)};
      if (absl::Status s = Allreduce(engine, "metric", ViewOf(mean), ReduceOp::kAverage); !s.ok()) {
        return {s.ToString()};
      }
      // Horovod averages through the postscale: the sum times 1 / size.
      if (mean[0] != sum * (1.0 / size)) {
        return {absl::StrCat("step ", step, ": average ", mean[0], ", want ", sum / size)};
      }
      std::vector<int32_t> count = {rank + 1};
      if (absl::Status s = Allreduce(engine, "count", ViewOf(count), ReduceOp::kAverage); !s.ok()) {
        return {s.ToString()};
      }
      if (count[0] != static_cast<int32_t>(sum * (1.0 / size))) {
        return {absl::StrCat("step ", step, ": int average ", count[0])};
      }
    }
    absl::StatusOr<int> last = Join(engine);
    if (!last.ok()) return {last.status().ToString()};
    // Everyone is back: allreduces take every rank again.
    std::vector<float> after = {1.0f};
    if (absl::Status s = Allreduce(engine, "after", ViewOf(after), ReduceOp::kSum); !s.ok()) {
      return {s.ToString()};
    }
    if (after[0] != static_cast<float>(size)) return {absl::StrCat("after join: ", after[0])};
    return {"", *last};
  });
}

TEST_CASE("join: ranks that joined contribute zeros, averages divide by every rank",
          "[engine][join]") {
  SECTION("2 ranks, rank 0 joins three steps early") {
    EngineGroup group(2);
    for (const JoinOutcome& outcome : RunUntilJoined(group, {2, 5})) {
      CHECK(outcome.problem == "");
      CHECK(outcome.last == 1);
    }
  }
  SECTION("3 ranks joining one after another, the middle one last") {
    EngineGroup group(3);
    for (const JoinOutcome& outcome : RunUntilJoined(group, {1, 6, 3})) {
      CHECK(outcome.problem == "");
      CHECK(outcome.last == 1);
    }
  }
  SECTION("3 ranks, all out of data at once") {
    EngineGroup group(3);
    for (const JoinOutcome& outcome : RunUntilJoined(group, {2, 2, 2})) {
      CHECK(outcome.problem == "");
      CHECK(outcome.last >= 0);
      CHECK(outcome.last < 3);
    }
  }
  SECTION("join twice in a row on one ring") {
    EngineGroup group(2);
    for (int round = 0; round < 2; ++round) {
      for (const JoinOutcome& outcome : RunUntilJoined(group, {round + 1, 3})) {
        CHECK(outcome.problem == "");
        CHECK(outcome.last == 1);
      }
    }
  }
}

TEST_CASE("join: a broadcast while a rank has joined fails clearly on the ranks that sent it",
          "[engine][join]") {
  EngineGroup group(2);
  std::vector<std::string> results = OnEveryRank<std::string>(2, [&](int rank) -> std::string {
    internal::Engine& engine = group.engine(rank);
    if (rank == 0) {
      absl::StatusOr<int> last = Join(engine);
      return last.ok() ? absl::StrCat("last ", *last) : last.status().ToString();
    }
    std::vector<float> value = {1.0f};
    absl::StatusOr<Handle> h =
        engine.Enqueue(testing::BroadcastRequest("weights", ViewOf(value), 1), true);
    const absl::Status broadcast = h.ok() ? h->Wait(absl::Seconds(120)) : h.status();
    absl::StatusOr<int> last = Join(engine);
    return absl::StrCat(broadcast.message(), " | last ", last.ok() ? *last : -1);
  });
  CHECK(results[0] == "last 1");
  CHECK(results[1] ==
        "'weights': broadcast cannot run while ranks [0] have joined (hvd.join): only "
        "allreduce takes part with joined ranks | last 1");
}

TEST_CASE("stall check: names missing ranks, past the shutdown time says so", "[engine][stall]") {
  internal::StallOptions options;
  options.check_time = absl::Seconds(10);
  options.shutdown_time = absl::Seconds(30);
  internal::StallInspector stall(options);
  const absl::Time start = absl::Now();
  // Rank 0 of 3 has "late" pending; rank 2's part of the round arrives,
  // rank 1's does not.
  stall.RoundStarted({"late"}, 0, 3);
  stall.PeerArrived(2);
  CHECK(stall.Check(start + absl::Seconds(5)).warning.empty());
  internal::StallInspector::Verdict verdict = stall.Check(start + absl::Seconds(11));
  CHECK_THAT(verdict.warning, Catch::Contains("for more than 10 seconds") &&
                                  Catch::EndsWith("Missing ranks:\n1: [late]"));
  CHECK(verdict.shutdown.empty());
  // Warned again only after another check time.
  CHECK(stall.Check(start + absl::Seconds(12)).warning.empty());
  // Now rank 1 negotiates, without "late", and rank 2 lacks "other" too.
  stall.RoundDecided({{"late", {1}}, {"other", {2}}});
  stall.RoundStarted({"late", "other"}, 0, 3);
  stall.PeerArrived(1);
  stall.PeerArrived(2);
  stall.RoundDecided({{"late", {1}}, {"other", {2}}});
  verdict = stall.Check(start + absl::Seconds(31));
  CHECK_THAT(verdict.shutdown,
             Catch::Contains("more than 30 seconds") && Catch::Contains("\n1: [late]"));
  CHECK_THAT(verdict.warning, Catch::Contains("\n1: [late]"));
  stall.Reset();
  CHECK(stall.Check(start + absl::Seconds(100)).warning.empty());
}

TEST_CASE("stall check: the engine fails a tensor a peer never submits, with the reason",
          "[engine][stall]") {
  internal::StallOptions stall;
  stall.check_time = absl::Milliseconds(300);
  stall.shutdown_time = absl::Seconds(1);
  std::vector<std::unique_ptr<internal::Engine>> engines;
  std::vector<std::shared_ptr<internal::Communicator>> comms;
  gloo::rendezvous::HashStore store;
  testing::RankGroup ring(store, "stall", 2);
  for (int r = 0; r < 2; ++r) {
    engines.push_back(std::make_unique<internal::Engine>(EngineOptions{}, stall));
    auto comm = std::make_shared<internal::GlooCommunicator>(ring.shared(r));
    comms.push_back(comm);
    engines[r]->Attach(
        1, [comm](internal::CommunicatorOp op) { return op(*comm); }, [comm] { comm->Abort(); });
  }
  std::vector<float> value = {1.0f};
  // Rank 1 never enqueues "late.tensor".
  const absl::Status status = Allreduce(*engines[0], "late.tensor", ViewOf(value), ReduceOp::kSum);
  CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(status.message()),
             Catch::Contains("stall check shut the job down") &&
                 Catch::Contains("Missing ranks:\n1: [late.tensor]"));
  for (int r = 0; r < 2; ++r) {
    std::shared_ptr<internal::Communicator> comm = comms[r];
    engines[r]->Detach(absl::AbortedError("test over"), [comm] { comm->Abort(); });
  }
}

// Rank 0 waits for a tensor rank 1 never sends, long enough for the stall
// check to warn; then the ring fails (a peer is lost, as in a reset) and rank
// 0 waits on for the next generation. Writes "ring failed" between the two.
void StallThenRingFailure() {
  internal::StallOptions stall;
  stall.check_time = absl::Milliseconds(200);
  gloo::rendezvous::HashStore store;
  testing::RankGroup ring(store, "stall-reset", 2);
  std::vector<std::unique_ptr<internal::Engine>> engines;
  std::vector<std::shared_ptr<internal::Communicator>> comms;
  for (int r = 0; r < 2; ++r) {
    engines.push_back(std::make_unique<internal::Engine>(EngineOptions{}, stall));
    auto comm = std::make_shared<internal::GlooCommunicator>(ring.shared(r));
    comms.push_back(comm);
    engines[r]->Attach(
        1, [comm](internal::CommunicatorOp op) { return op(*comm); }, [comm] { comm->Abort(); });
  }
  std::vector<float> value = {1.0f};
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  absl::StatusOr<Handle> late = engines[0]->Enqueue(
      testing::AllreduceRequest("late.tensor", {ViewOf(value)}, options), false);
  if (!late.ok()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  comms[1]->Abort();
  engines[1]->Detach(absl::AbortedError("lost"), [] {});
  (void)late->Wait(absl::Seconds(30));  // fails with the ring
  std::fprintf(stderr, "ring failed\n");
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // waiting to rejoin
  std::shared_ptr<internal::Communicator> comm = comms[0];
  engines[0]->Detach(absl::AbortedError("test over"), [comm] { comm->Abort(); });
}

TEST_CASE("stall check: nothing is stalled once the ring failed", "[engine][stall]") {
  const auto [signal, err] = hvdd_test::RunInChild(StallThenRingFailure);
  CHECK(signal == 0);
  const size_t failed = err.find("ring failed\n");
  REQUIRE(failed != std::string::npos);
  // Before: the warning, naming the rank and the tensor.
  CHECK_THAT(err.substr(0, failed),
             Catch::Contains("stall check") && Catch::Contains("Missing ranks:\n1: [late.tensor]"));
  // After: silence, though the worker waits on (as it does for a rendezvous).
  CHECK(err.find("stall check", failed) == std::string::npos);
}

TEST_CASE("stall options come from Horovod's variables", "[engine][stall]") {
  setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "5", 1);
  setenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "20", 1);
  absl::StatusOr<internal::StallOptions> options = internal::StallOptions::FromEnvironment();
  REQUIRE(options.ok());
  CHECK(options->enabled);
  CHECK(options->check_time == absl::Seconds(5));
  CHECK(options->shutdown_time == absl::Seconds(20));
  setenv("HOROVOD_STALL_CHECK_DISABLE", "1", 1);
  CHECK_FALSE(internal::StallOptions::FromEnvironment()->enabled);
  setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "soon", 1);
  CHECK(internal::StallOptions::FromEnvironment().status().message() ==
        "HOROVOD_STALL_CHECK_TIME_SECONDS must be a non-negative number of seconds, got 'soon'");
  unsetenv("HOROVOD_STALL_CHECK_DISABLE");
  unsetenv("HOROVOD_STALL_CHECK_TIME_SECONDS");
  unsetenv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  options = internal::StallOptions::FromEnvironment();
  CHECK(options->check_time == absl::Seconds(60));
  CHECK(options->shutdown_time == absl::ZeroDuration());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("timeline: every tensor's phases, batches and cycles in a complete JSON array",
          "[engine][timeline]") {
  const std::string path = absl::StrCat("/tmp/hvdd_test_timeline_", getpid(), ".json");
  // A long cycle: both requests are in before the first round, so they fuse.
  EngineOptions options;
  options.cycle_time = absl::Milliseconds(200);
  EngineGroup group(2, options);
  absl::StatusOr<std::unique_ptr<internal::Timeline>> opened =
      internal::Timeline::Open(path, /*mark_cycles=*/true);
  REQUIRE(opened.ok());
  std::shared_ptr<internal::Timeline> timeline = *std::move(opened);
  group.engine(0).set_timeline(timeline);
  OnEveryRank<int>(2, [&](int rank) {
    std::vector<float> a(100, 1.0f), b(100, 1.0f);
    absl::StatusOr<Handle> ha =
        group.engine(rank).Enqueue(testing::AllreduceRequest("grad.a", {ViewOf(a)}), false);
    absl::StatusOr<Handle> hb =
        group.engine(rank).Enqueue(testing::AllreduceRequest("grad.b", {ViewOf(b)}), false);
    ha->Wait().IgnoreError();
    hb->Wait().IgnoreError();
    return 0;
  });
  group.engine(0).set_timeline(nullptr);
  timeline->Stop();
  const std::string json = ReadFile(path);
  std::remove(path.c_str());
  CHECK(json.front() == '[');
  CHECK(json.find("\n]\n") == json.size() - 3);
  for (const char* tensor : {"grad.a", "grad.b"}) {
    CHECK_THAT(json, Catch::Contains(absl::StrCat(R"("args": {"name": ")", tensor, "\"}")));
  }
  CHECK_THAT(json, Catch::Contains(R"("name": "NEGOTIATE_ALLREDUCE", "ph": "B")"));
  CHECK_THAT(json, Catch::Contains(R"("name": "ALLREDUCE", "ph": "B")"));
  CHECK_THAT(json, Catch::Contains(R"("name": "WAIT_FOR_DATA", "ph": "B")"));
  CHECK_THAT(json, Catch::Contains(R"("name": "GLOO_ALLREDUCE", "ph": "B")"));
  CHECK_THAT(json, Catch::Contains(R"("name": "CYCLE_START", "ph": "i")"));
  // Both were ready in one round: one batch of two. Over TCP (test_engine_tcp)
  // it is copied into the fusion buffer before the collective and out of it
  // after, as Horovod shows it; in one host's shared memory the collective
  // reads and writes the two tensors where they lie, with no copies to show.
  CHECK_THAT(json, Catch::Contains(R"("tensors_in_batch": 2)"));
  const size_t in = json.find(R"("name": "MEMCPY_IN_FUSION_BUFFER", "ph": "B")");
  const size_t reduce = json.find(R"("name": "GLOO_ALLREDUCE", "ph": "B")");
  const size_t out = json.find(R"("name": "MEMCPY_OUT_FUSION_BUFFER", "ph": "B")");
  if (group.in_shared_memory()) {
    CHECK(in == std::string::npos);
    CHECK(out == std::string::npos);
    return;
  }
  REQUIRE(in != std::string::npos);
  REQUIRE(out != std::string::npos);
  CHECK(in < reduce);
  CHECK(reduce < out);
}

}  // namespace
}  // namespace horovodd
