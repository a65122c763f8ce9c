// Connecting, bad arguments, rebuilt rings, lost peers, timeouts and
// AbortGlooContext.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "test_collectives_harness.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd {
namespace {

using testing::MakeTensor;
using testing::OnEveryRank;
using testing::RankGroup;

// Polls `condition` until it holds or `timeout` passes; returns whether it held.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

Tensor Ones(int64_t count) {
  return MakeTensor(DType::kFloat32, {count}, [](int64_t) { return 1.0; });
}

AllreduceOptions Sum(const std::string& name = "") {
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  options.name = name;
  return options;
}

TEST_CASE("ConnectGlooContext rejects bad options and times out without peers",
          "[collectives][connect]") {
  gloo::rendezvous::HashStore store;
  internal::ConnectOptions options;
  options.rank = 3;
  options.size = 3;
  absl::StatusOr<std::shared_ptr<internal::GlooContext>> context =
      internal::ConnectGlooContext(store, options);
  CHECK(context.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(context.status().message(), "rank 3 is out of range for size 3"));

  options.rank = 0;
  options.size = 0;
  context = internal::ConnectGlooContext(store, options);
  CHECK(context.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(context.status().message(), "size must be at least 1"));

  // Rank 1 never shows up.
  options.size = 2;
  options.timeout = absl::Milliseconds(300);
  gloo::rendezvous::PrefixStore scoped("lonely", store);
  context = internal::ConnectGlooContext(scoped, options);
  CHECK(context.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(context.status().message(), "connecting gloo context (rank 0 of 2)"));
}

TEST_CASE("a single rank's collectives are local", "[collectives][connect]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "single", 1);
  Tensor tensor = Ones(5);
  AllreduceOptions average;
  average.postscale_factor = 4.0;
  REQUIRE(internal::Allreduce(group.context(0), tensor.view(), average).ok());
  CHECK(testing::FirstMismatch(tensor, [](int64_t) { return 4.0; }) == "");
  CHECK(internal::Broadcast(group.context(0), tensor.view(), 0).ok());
  CHECK(internal::Barrier(group.context(0)).ok());
  absl::StatusOr<Tensor> gathered = internal::Allgather(group.context(0), tensor.view());
  REQUIRE(gathered.ok());
  CHECK(gathered->shape() == std::vector<int64_t>{5});
}

TEST_CASE("bad arguments give INVALID_ARGUMENT naming the problem", "[collectives][arguments]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "bad-arguments", 3);

  SECTION("checks one rank makes alone, the same on every rank") {
    auto messages = OnEveryRank<std::vector<std::string>>(3, [&](int rank) {
      internal::GlooContext& context = group.context(rank);
      std::vector<std::string> out;
      auto record = [&](const absl::Status& status) {
        out.push_back(status.code() == absl::StatusCode::kInvalidArgument
                          ? std::string(status.message())
                          : "not INVALID_ARGUMENT: " + status.ToString());
      };
      Tensor tensor = Ones(6);
      TensorView on_gpu = tensor.view();
      on_gpu.device = Device{DeviceType::kCUDA, 1};
      record(internal::Allreduce(context, on_gpu, Sum("w")));
      TensorView negative = tensor.view();
      negative.shape = {2, -3};
      record(internal::Allreduce(context, negative, Sum()));
      TensorView null_data = tensor.view();
      null_data.data = nullptr;
      record(internal::Broadcast(context, null_data, 0));
      AllreduceOptions infinite = Sum();
      infinite.prescale_factor = 1.0 / 0.0;
      record(internal::Allreduce(context, tensor.view(), infinite));
      record(internal::Broadcast(context, tensor.view(), 3));
      record(internal::Alltoall(context, tensor.view(), {1, 2}, nullptr).status());
      record(internal::Alltoall(context, tensor.view(), {3, 3, 1}, nullptr).status());
      record(internal::Alltoall(context, tensor.view(), {7, -1, 0}, nullptr).status());
      Tensor seven = Ones(7);
      record(internal::Alltoall(context, seven.view(), {}, nullptr).status());
      Tensor scalar(DType::kFloat32, {});
      record(internal::Allgather(context, scalar.view()).status());
      record(internal::Reducescatter(context, scalar.view(), {ReduceOp::kSum}).status());
      // The context is still usable afterwards.
      Tensor ones = Ones(4);
      absl::Status after = internal::Allreduce(context, ones.view(), Sum());
      out.push_back(after.ok() ? testing::FirstMismatch(ones, [](int64_t) { return 3.0; })
                               : after.ToString());
      return out;
    });
    for (const auto& m : messages) {
      REQUIRE(m.size() == 12);
      CHECK(absl::StrContains(m[0], "allreduce 'w': tensor is on CUDA device 1"));
      CHECK(absl::StrContains(m[1], "allreduce: shape [2, -3] has a negative dimension"));
      CHECK(absl::StrContains(m[2], "broadcast: tensor data is null but shape [6] has 6"));
      CHECK(absl::StrContains(m[3], "prescale_factor must be finite"));
      CHECK(absl::StrContains(m[4], "broadcast: root 3 is out of range for 3 ranks"));
      CHECK(absl::StrContains(m[5], "alltoall: got 2 splits for 3 ranks"));
      CHECK(absl::StrContains(m[6], "alltoall: splits sum to 7 but the first dimension is 6"));
      CHECK(absl::StrContains(m[7], "alltoall: split 1 is negative (-1)"));
      CHECK(absl::StrContains(m[8], "first dimension 7 does not divide evenly among 3 ranks"));
      CHECK(absl::StrContains(m[9], "allgather: needs a tensor with at least one dimension"));
      CHECK(absl::StrContains(m[10], "reducescatter: needs a tensor with at least one dimension"));
      CHECK(m[11] == "");
    }
  }

  SECTION("ranks that disagree all fail, and are named") {
    auto messages = OnEveryRank<std::vector<std::string>>(3, [&](int rank) {
      internal::GlooContext& context = group.context(rank);
      std::vector<std::string> out;
      auto record = [&](const absl::Status& status) {
        out.push_back(status.code() == absl::StatusCode::kInvalidArgument
                          ? std::string(status.message())
                          : "not INVALID_ARGUMENT: " + status.ToString());
      };
      Tensor trailing(DType::kFloat32, {2, rank == 1 ? 4 : 3});
      record(internal::Allgather(context, trailing.view()).status());
      Tensor typed(rank == 2 ? DType::kInt32 : DType::kFloat32, {2});
      record(internal::Allgather(context, typed.view()).status());
      Tensor rows(DType::kFloat64, {rank == 2 ? 5 : 4, 2});
      record(internal::Reducescatter(context, rows.view(), {ReduceOp::kSum}).status());
      // Only rank 1 passes bad splits; the others learn it from the header.
      Tensor six = Ones(6);
      std::vector<int64_t> splits =
          rank == 1 ? std::vector<int64_t>{1, 1, 1} : std::vector<int64_t>{2, 2, 2};
      record(internal::Alltoall(context, six.view(), splits, nullptr).status());
      return out;
    });
    for (int rank = 0; rank < 3; ++rank) {
      const auto& m = messages[rank];
      REQUIRE(m.size() == 4);
      CHECK(m[0] ==
            "allgather: rank 1 passed a float32 tensor of shape [2, 4] but rank 0 passed a "
            "float32 tensor of shape [2, 3]; every rank must pass the same dtype and dimensions "
            "after the first");
      CHECK(absl::StrContains(m[1], "rank 2 passed a int32 tensor of shape [2]"));
      CHECK(absl::StrContains(m[2],
                              "rank 2 passed a float64 tensor of shape [5, 2] but rank 0 "
                              "passed a float64 tensor of shape [4, 2]; every rank must "
                              "pass the same dtype and shape"));
      if (rank == 1) {
        CHECK(m[3] == "alltoall: splits sum to 3 but the first dimension is 6");
      } else {
        CHECK(m[3] == "alltoall: rank 1 passed invalid arguments (its own error names them)");
      }
    }
  }
}

TEST_CASE("contexts torn down and rebuilt at new sizes in the same threads",
          "[collectives][rebuild]") {
  gloo::rendezvous::HashStore store;
  const std::vector<int> sizes = {4, 3, 4, 2};
  auto problems = OnEveryRank<std::vector<std::string>>(4, [&](int rank) {
    std::vector<std::string> out;
    for (size_t round = 0; round < sizes.size(); ++round) {
      const int size = sizes[round];
      if (rank >= size) continue;
      gloo::rendezvous::PrefixStore scoped(absl::StrCat("generation", round), store);
      internal::ConnectOptions options;
      options.rank = rank;
      options.size = size;
      options.timeout = testing::kCollectiveTimeout;
      absl::StatusOr<std::shared_ptr<internal::GlooContext>> context =
          internal::ConnectGlooContext(scoped, options);
      if (!context.ok()) {
        out.push_back(context.status().ToString());
        continue;
      }
      Tensor tensor = MakeTensor(DType::kInt64, {1000}, [&](int64_t i) { return rank + i; });
      absl::Status status = internal::Allreduce(**context, tensor.view(), Sum());
      const double base = size * (size - 1) / 2.0;
      out.push_back(status.ok()
                        ? testing::FirstMismatch(tensor, [&](int64_t i) { return base + size * i; })
                        : status.ToString());
      Tensor mine = Ones(rank);
      absl::StatusOr<Tensor> gathered = internal::Allgather(**context, mine.view());
      const int64_t want = size * (size - 1) / 2;
      out.push_back(gathered.ok() ? (gathered->numel() == want ? "" : "wrong allgather size")
                                  : gathered.status().ToString());
    }
    return out;
  });
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    for (const std::string& problem : problems[rank]) CHECK(problem == "");
  }
  CHECK(problems[0].size() == 8);
  CHECK(problems[3].size() == 4);
}

TEST_CASE("a peer that destroys its context makes the others' next op fail",
          "[collectives][faults]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "leaver", 3);
  constexpr int kLeaveAfter = 3;
  struct Outcome {
    int failed_at = -1;
    absl::Status failure;
    absl::Status next;
  };
  auto outcomes = OnEveryRank<Outcome>(3, [&](int rank) {
    Outcome outcome;
    for (int iteration = 0; iteration < 1000; ++iteration) {
      if (rank == 2 && iteration == kLeaveAfter) {
        group.shared(2).reset();  // closes its sockets, mid-run for the others
        return outcome;
      }
      Tensor tensor = Ones(100000);
      absl::Status status = internal::Allreduce(group.context(rank), tensor.view(), Sum("x"));
      if (!status.ok()) {
        outcome.failed_at = iteration;
        outcome.failure = status;
        outcome.next = internal::Barrier(group.context(rank));
        return outcome;
      }
    }
    return outcome;
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << outcomes[rank].failure);
    CHECK(outcomes[rank].failed_at == kLeaveAfter);
    CHECK(outcomes[rank].failure.code() == absl::StatusCode::kUnavailable);
    CHECK(absl::StartsWith(outcomes[rank].failure.message(), "allreduce 'x' failed: "));
    // The context is dead: the next op fails at once, with the same cause.
    CHECK(outcomes[rank].next.code() == absl::StatusCode::kUnavailable);
    CHECK(absl::StartsWith(outcomes[rank].next.message(), "barrier failed: allreduce 'x' failed"));
  }
}

TEST_CASE("a collective that outlives the timeout fails with DEADLINE_EXCEEDED",
          "[collectives][faults]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "slow", 2, absl::Seconds(3));
  // Rank 1 is alive but never joins.
  Tensor tensor = Ones(10);
  absl::Status status = internal::Allreduce(group.context(0), tensor.view(), Sum("late"));
  CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(status.message(), "allreduce 'late' failed"));
  CHECK(internal::Barrier(group.context(0)).code() == absl::StatusCode::kDeadlineExceeded);
  // Rank 0 closed its side, so rank 1 fails at once instead of timing out.
  absl::Status peer = internal::Allreduce(group.context(1), tensor.view(), Sum());
  CHECK(peer.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("AbortGlooContext unblocks an allreduce waiting on a silent peer",
          "[collectives][abort]") {
  gloo::rendezvous::HashStore store;
  // Long enough that only the abort can end the wait in time.
  RankGroup group(store, "silent", 3, absl::Minutes(2));
  std::atomic<pid_t> thread_ids[2] = {0, 0};
  absl::Status results[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      thread_ids[rank] = testing::CurrentThreadId();
      Tensor tensor = Ones(4096);
      results[rank] = internal::Allreduce(group.context(rank), tensor.view(), Sum("blocked"));
    });
  }
  // Rank 2 never calls allreduce. Abort rank 0 once it sleeps in a wait.
  REQUIRE(
      WaitFor([&] { return thread_ids[0] != 0 && testing::ThreadIsInFutexWait(thread_ids[0]); }));
  internal::AbortGlooContext(group.context(0));
  internal::AbortGlooContext(group.context(0));  // twice is fine
  threads[0].join();
  CHECK(results[0].code() == absl::StatusCode::kAborted);
  CHECK(absl::StartsWith(results[0].message(), "allreduce 'blocked' aborted"));

  // Rank 1 waits on rank 2 (or already failed because rank 0 left).
  internal::AbortGlooContext(group.context(1));
  threads[1].join();
  CHECK(!results[1].ok());
  CHECK(results[1].code() != absl::StatusCode::kDeadlineExceeded);

  // Every later op on an aborted context fails at once.
  Tensor tensor = Ones(8);
  CHECK(internal::Allreduce(group.context(0), tensor.view(), Sum()).code() ==
        absl::StatusCode::kAborted);
  CHECK(internal::Allgather(group.context(0), tensor.view()).status().code() ==
        absl::StatusCode::kAborted);
  CHECK(internal::Alltoall(group.context(0), tensor.view(), {}, nullptr).status().code() ==
        absl::StatusCode::kAborted);
  CHECK(
      internal::Reducescatter(group.context(0), tensor.view(), {ReduceOp::kSum}).status().code() ==
      absl::StatusCode::kAborted);
  CHECK(internal::Broadcast(group.context(0), tensor.view(), 0).code() ==
        absl::StatusCode::kAborted);
  CHECK(internal::Barrier(group.context(0)).code() == absl::StatusCode::kAborted);
}

TEST_CASE("aborting one rank during a stream of collectives ends every rank's stream",
          "[collectives][abort]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "stream", 3, absl::Seconds(30));
  std::atomic<int> completed[3] = {0, 0, 0};
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      for (int iteration = 0; iteration < 100000; ++iteration) {
        Tensor tensor = Ones(65536);
        absl::Status status = internal::Allreduce(group.context(rank), tensor.view(), Sum());
        if (!status.ok()) {
          results[rank] = status;
          return;
        }
        completed[rank].fetch_add(1);
      }
    });
  }
  REQUIRE(WaitFor([&] { return completed[0] >= 5 && completed[1] >= 5 && completed[2] >= 5; }));
  // Its sockets reset under the others' writes: that must not raise a fatal
  // SIGPIPE either.
  internal::AbortGlooContext(group.context(1));
  for (std::thread& thread : threads) thread.join();
  CHECK(results[1].code() == absl::StatusCode::kAborted);
  CHECK(!results[0].ok());
  CHECK(!results[2].ok());
}

}  // namespace
}  // namespace horovodd
