// The shared-memory transport (worker_runtime/shm): ranks are threads of
// this process, each with its own ShmGroup mapping one segment, as local
// ranks in separate processes would (the peers open the leader's memfd
// through /proc, the same path). Results are checked against the
// reference reduction of test_collectives_harness.h.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "shm_test_support.h"
#include "test_collectives_harness.h"
#include "worker_runtime/shm/cpu_spread.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd {
namespace {

using internal::shm::ShmGroup;
using testing::Deadline;
using testing::FirstMismatch;
using testing::MakeGroups;
using testing::MakeTensor;
using testing::OnEveryRank;

// Element i of rank r's input: small integers, so every dtype and every
// order of summation gives exact results.
double Input(int rank, int64_t i) { return static_cast<double>((i * 7 + rank * 3) % 11 + 1); }

TEST_CASE("shm allreduce matches the reference for every dtype, op and size") {
  for (const int size : {2, 3, 4}) {
    // A small slot makes the larger tensors take several rounds.
    auto groups = MakeGroups(size, 4096);
    for (const DType dtype : testing::kAllDTypes) {
      for (const ReduceOp op : testing::kAllReduceOps) {
        if (op == ReduceOp::kProduct && dtype == DType::kUInt8) continue;
        for (const int64_t count :
             {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{20000}}) {
          CAPTURE(size, DTypeName(dtype), static_cast<int>(op), count);
          const auto mismatches = OnEveryRank<std::string>(size, [&](int rank) {
            // Products stay small: every input is 1 or 2.
            auto value = [&](int r, int64_t i) {
              return op == ReduceOp::kProduct ? static_cast<double>(1 + (i + r) % 2) : Input(r, i);
            };
            Tensor t = MakeTensor(dtype, {count}, [&](int64_t i) { return value(rank, i); });
            AllreduceOptions options;
            options.op = op;
            absl::Status status =
                internal::shm::Allreduce(*groups[rank], t.view(), options, Deadline());
            if (!status.ok()) return status.ToString();
            return FirstMismatch(t, [&](int64_t i) {
              std::vector<double> values;
              for (int r = 0; r < size; ++r) values.push_back(value(r, i));
              return testing::Reduce(op, dtype, values);
            });
          });
          for (const std::string& m : mismatches) CHECK(m == "");
        }
      }
    }
  }
}

TEST_CASE("a small allreduce folded by a few of 12 ranks gives every rank the whole result") {
  // Rounds under 12 KiB are folded by one rank per KiB (1 element, 1200
  // bytes, 4 KiB), the rest only copy in and out; 20,000 bytes go in rounds
  // of 4 KiB. Every rank's values count, prescaled, and every rank ends
  // with the same bits.
  constexpr int kSize = 12;
  auto groups = MakeGroups(kSize, 4096);
  for (const int64_t count :
       {int64_t{1}, int64_t{300}, int64_t{1024}, int64_t{3100}, int64_t{5000}}) {
    CAPTURE(count);
    auto value = [](int rank, int64_t i) {
      return 1.0 / (3.0 + static_cast<double>((i * 13 + rank * 7) % 17)) + rank * 0.1;
    };
    const auto results = OnEveryRank<std::string>(kSize, [&](int rank) -> std::string {
      Tensor t = MakeTensor(DType::kFloat32, {count}, [&](int64_t i) { return value(rank, i); });
      AllreduceOptions options;
      options.op = ReduceOp::kSum;
      options.prescale_factor = 0.5;
      options.postscale_factor = 3.0;
      absl::Status s = internal::shm::Allreduce(*groups[rank], t.view(), options, Deadline());
      if (!s.ok()) return s.ToString();
      return std::string(static_cast<const char*>(t.data()), t.nbytes());
    });
    REQUIRE(results[0].size() == static_cast<size_t>(count) * sizeof(float));
    for (int r = 1; r < kSize; ++r) CHECK(results[r] == results[0]);
    const float* got = reinterpret_cast<const float*>(results[0].data());
    for (int64_t i = 0; i < count; i += std::max<int64_t>(1, count / 37)) {
      double want = 0;
      for (int r = 0; r < kSize; ++r) want += 0.5 * value(r, i);
      CHECK(got[i] == Approx(3.0 * want).epsilon(1e-5));
    }
  }
}

TEST_CASE("shm allgather, broadcast, alltoall, reducescatter and barrier") {
  const int size = 3;
  auto groups = MakeGroups(size, 1024);
  const auto errors = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
    ShmGroup& g = *groups[rank];
    // Allgather of rank + 1 rows of 300 int32s: several rounds of 1 KiB.
    Tensor part =
        MakeTensor(DType::kInt32, {rank + 1, 300}, [&](int64_t i) { return rank * 10000 + i; });
    auto gathered = internal::shm::Allgather(g, part.view(), Deadline());
    if (!gathered.ok()) return gathered.status().ToString();
    if (gathered->shape() != std::vector<int64_t>{6, 300}) return "allgather shape";
    int64_t row = 0;
    for (int r = 0; r < size; ++r) {
      for (int64_t i = 0; i < (r + 1) * 300; ++i) {
        if (testing::GetElement(gathered->data(), DType::kInt32, row * 300 + i) != r * 10000 + i) {
          return "allgather value from rank " + std::to_string(r);
        }
      }
      row += r + 1;
    }
    // Broadcast from rank 2 of 5000 float64s (several rounds).
    Tensor b =
        MakeTensor(DType::kFloat64, {5000}, [&](int64_t i) { return rank == 2 ? i * 0.5 : -1; });
    absl::Status status = internal::shm::Broadcast(g, b.view(), 2, Deadline());
    if (!status.ok()) return status.ToString();
    if (std::string m = FirstMismatch(b, [](int64_t i) { return i * 0.5; }); !m.empty()) {
      return "broadcast: " + m;
    }
    // Alltoall: rank r sends (d + 1) * 100 + 150 * r rows of one int64 to
    // rank d: the biggest block (the last rank's to the last) is no other
    // rank's own, and sets how many rounds every rank runs.
    auto block = [](int from, int to) { return int64_t{(to + 1) * 100 + 150 * from}; };
    std::vector<int64_t> splits;
    int64_t rows = 0;
    for (int d = 0; d < size; ++d) {
      splits.push_back(block(rank, d));
      rows += splits.back();
    }
    Tensor a = MakeTensor(DType::kInt64, {rows}, [&](int64_t i) { return rank * 100000 + i; });
    std::vector<int64_t> received;
    auto exchanged = internal::shm::Alltoall(g, a.view(), splits, &received, Deadline());
    if (!exchanged.ok()) return exchanged.status().ToString();
    std::vector<int64_t> expected_splits;
    for (int r = 0; r < size; ++r) expected_splits.push_back(block(r, rank));
    if (received != expected_splits) return "alltoall splits";
    int64_t at = 0;  // where rank r's rows land
    for (int r = 0; r < size; ++r) {
      int64_t sent_before = 0;  // rank r's rows for ranks before this one
      for (int d = 0; d < rank; ++d) sent_before += block(r, d);
      for (int64_t i = 0; i < block(r, rank); ++i) {
        const double want = r * 100000 + sent_before + i;
        if (testing::GetElement(exchanged->data(), DType::kInt64, at + i) != want) {
          return "alltoall value from rank " + std::to_string(r);
        }
      }
      at += block(r, rank);
    }
    // Reducescatter of 7 rows of 500 float32s: rows 3, 2, 2.
    Tensor rs = MakeTensor(DType::kFloat32, {7, 500}, [&](int64_t i) { return Input(rank, i); });
    auto scattered =
        internal::shm::Reducescatter(g, rs.view(), {ReduceOp::kSum, 1.0, 2.0}, Deadline());
    if (!scattered.ok()) return scattered.status().ToString();
    const int64_t first_row = rank == 0 ? 0 : 3 + (rank - 1) * 2;
    if (scattered->shape() != std::vector<int64_t>{rank == 0 ? 3 : 2, 500}) {
      return "reducescatter shape";
    }
    if (std::string m = FirstMismatch(*scattered,
                                      [&](int64_t i) {
                                        double sum = 0;
                                        for (int r = 0; r < size; ++r)
                                          sum += Input(r, first_row * 500 + i);
                                        return 2 * sum;
                                      });
        !m.empty()) {
      return "reducescatter: " + m;
    }
    status = internal::shm::Barrier(g, Deadline());
    return status.ok() ? "" : status.ToString();
  });
  for (const std::string& e : errors) CHECK(e == "");
}

TEST_CASE("shm ops that compare arguments fail on every rank and leave the group usable") {
  const int size = 2;
  auto groups = MakeGroups(size, 1024);
  const auto errors = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
    Tensor t = MakeTensor(rank == 0 ? DType::kFloat32 : DType::kInt32, {4, 2},
                          [](int64_t i) { return i; });
    auto gathered = internal::shm::Allgather(*groups[rank], t.view(), Deadline());
    if (gathered.ok() || gathered.status().code() != absl::StatusCode::kInvalidArgument) {
      return "mismatched dtypes were not refused";
    }
    absl::Status barrier = internal::shm::Barrier(*groups[rank], Deadline());
    return barrier.ok() ? "" : barrier.ToString();
  });
  for (const std::string& e : errors) CHECK(e == "");
}

// Each rank folds its own slice of every round and the others copy it
// (SliceRounds), so inexact floats must still give every rank the same
// bits, with scale factors and across rounds; so must min and max where
// the inputs hold -0 and +0 and NaNs (which of two equal or unordered
// values wins depends on the order of the fold).
TEST_CASE("every rank ends with the same bits for inexact floats, signed zeros and NaNs") {
  for (const int size : {2, 3}) {
    auto groups = MakeGroups(size, 4096);
    for (const DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct,
                                ReduceOp::kMin, ReduceOp::kMax}) {
        const bool ordering = op == ReduceOp::kMin || op == ReduceOp::kMax;
        CAPTURE(size, DTypeName(dtype), static_cast<int>(op));
        auto value = [&](int rank, int64_t i) {
          if (ordering) {
            switch ((i + rank) % 4) {
              case 0:
                return 0.0;
              case 1:
                return -0.0;
              case 2:
                return std::nan("");
              default:
                return static_cast<double>(i % 5) - 2.0;
            }
          }
          return 1.0 / (3.0 + static_cast<double>((i * 13 + rank * 7) % 17)) + rank * 0.1;
        };
        const auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
          Tensor t = MakeTensor(dtype, {5000}, [&](int64_t i) { return value(rank, i); });
          AllreduceOptions options;
          options.op = op;
          if (!ordering) {
            options.prescale_factor = 0.3;
            options.postscale_factor = 1.7;
          }
          absl::Status s = internal::shm::Allreduce(*groups[rank], t.view(), options, Deadline());
          if (!s.ok()) return s.ToString();
          return std::string(static_cast<const char*>(t.data()), t.nbytes());
        });
        REQUIRE(results[0].size() == 5000 * DTypeSize(dtype));
        for (int r = 1; r < size; ++r) CHECK(results[r] == results[0]);
        if (dtype == DType::kFloat16 || ordering) continue;
        // And the right value, within rounding.
        const double* as_double = reinterpret_cast<const double*>(results[0].data());
        const float* as_float = reinterpret_cast<const float*>(results[0].data());
        for (int64_t i = 0; i < 5000; i += 499) {
          double folded = op == ReduceOp::kProduct ? 1.0 : 0.0;
          for (int r = 0; r < size; ++r) {
            const double x = 0.3 * value(r, i);
            folded = op == ReduceOp::kProduct ? folded * x : folded + x;
          }
          const double want = 1.7 * (op == ReduceOp::kAverage ? folded / size : folded);
          const double got = dtype == DType::kFloat64 ? as_double[i] : as_float[i];
          CHECK(got == Approx(want).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("the shm allreduce that confirms itself writes nothing unless every rank is ready") {
  // Rank 0 is always ready, the others are or are not; with 3 ranks two say
  // no at once. Both answers in turn, on the same group's rounds.
  for (const int size : {2, 3}) {
    auto groups = MakeGroups(size, 4096);
    for (const bool others_ready : {false, true, false, true}) {
      const auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
        Tensor t = MakeTensor(DType::kFloat32, {3000}, [&](int64_t i) { return Input(rank, i); });
        AllreduceOptions options;
        options.op = ReduceOp::kSum;
        auto done = internal::shm::AllreduceIfAllReady(
            *groups[rank], t.view(), rank == 0 || others_ready, options, Deadline());
        if (!done.ok()) return done.status().ToString();
        if (*done != others_ready) return "wrong confirmation";
        return FirstMismatch(t, [&](int64_t i) {
          double sum = 0;
          for (int r = 0; r < size; ++r) sum += Input(r, i);
          return others_ready ? sum : Input(rank, i);
        });
      });
      for (const std::string& r : results) CHECK(r == "");
    }
  }
}

TEST_CASE("an abort wakes a rank waiting for a peer that never comes, and every later op fails") {
  auto groups = MakeGroups(2, 1024);
  std::atomic<bool> returned{false};
  absl::Status waited;
  std::thread waiter([&] {
    waited = internal::shm::Barrier(*groups[0], Deadline());
    returned = true;
  });
  // The waiter is asleep on the futex (or still spinning): either way the
  // abort ends its wait.
  groups[1]->Abort();
  waiter.join();
  CHECK(returned);
  CHECK(waited.code() == absl::StatusCode::kAborted);
  CHECK(internal::shm::Barrier(*groups[1], Deadline()).code() == absl::StatusCode::kAborted);
}

TEST_CASE("a wait past its deadline fails, and the group is dead for the peer too") {
  auto groups = MakeGroups(2, 1024);
  absl::Status status = internal::shm::Barrier(*groups[0], absl::Now() + absl::Milliseconds(100));
  CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(internal::shm::Barrier(*groups[1], Deadline()).code() == absl::StatusCode::kUnavailable);
}

// The kernel sometimes runs two local ranks on one CPU for a while, with
// another CPU idle. A wait that spins there only delays the peer it waits
// for; it must sleep at once, so the CPU goes to the peer (and the wake-up
// can move the sleeper to an idle CPU). Ranks on different CPUs spin.
TEST_CASE("a wait sleeps without spinning where its peer waited on the same CPU") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    WARN("needs two CPUs to run on: skipped");
    return;
  }
  auto groups = MakeGroups(2, 1024);
  auto barriers_on = [&](int rank, int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) return std::string("pin");
    for (int i = 0; i < 50; ++i) {
      absl::Status s = internal::shm::Barrier(*groups[rank], Deadline());
      if (!s.ok()) return s.ToString();
    }
    return std::string();
  };
  for (const bool same_cpu : {false, true}) {
    CAPTURE(same_cpu);
    const uint64_t before = groups[0]->shared_cpu_sleeps() + groups[1]->shared_cpu_sleeps();
    std::string a_error, b_error;
    std::thread a([&] { a_error = barriers_on(0, cpus[0]); });
    std::thread b([&] { b_error = barriers_on(1, cpus[same_cpu ? 0 : 1]); });
    a.join();
    b.join();
    REQUIRE(a_error == "");
    REQUIRE(b_error == "");
    const uint64_t after = groups[0]->shared_cpu_sleeps() + groups[1]->shared_cpu_sleeps();
    if (same_cpu) {
      // After the first barrier each has said where it waits, and on one
      // CPU whichever arrives first must wait for the other.
      CHECK(after - before >= 40);
    } else {
      CHECK(after == before);
    }
  }
}

// With more local ranks than CPUs, a rank on a CPU the kernel crowded moves
// itself to the emptiest CPU it may use (cpu_spread.h).
namespace {

// EmptierCpu for rank `me` of ranks that last waited on rank_cpus (-1: not
// heard from yet), counted per CPU as the group's header counts them.
int MoveOf(const std::vector<int>& rank_cpus, int me, const std::vector<int>& allowed) {
  const auto on = [&](int cpu) {
    return static_cast<int>(std::count(rank_cpus.begin(), rank_cpus.end(), cpu));
  };
  std::vector<int> ranks_on;
  for (int cpu : allowed) ranks_on.push_back(on(cpu));
  const int mine = rank_cpus[me];
  return internal::shm::EmptierCpu(mine, mine < 0 ? 0 : on(mine),
                                   static_cast<int>(rank_cpus.size()), allowed, ranks_on);
}

}  // namespace

TEST_CASE("a crowded rank moves to the emptiest allowed CPU, and only a crowded one") {
  // 4 ranks on CPUs 0 and 1: 3 on CPU 1 and 1 on CPU 0.
  const std::vector<int> three_one = {1, 1, 0, 1};
  CHECK(MoveOf(three_one, 0, {0, 1}) == 0);
  CHECK(MoveOf(three_one, 3, {0, 1}) == 0);
  CHECK(MoveOf(three_one, 2, {0, 1}) == -1);  // the lone rank stays
  // Even: nobody moves.
  for (int me = 0; me < 4; ++me) CHECK(MoveOf({0, 1, 0, 1}, me, {0, 1}) == -1);
  // Not allowed elsewhere, or not known yet: stay.
  CHECK(MoveOf(three_one, 0, {1}) == -1);
  CHECK(MoveOf({1, 1, 1, -1}, 3, {0, 1}) == -1);
  // Ranks not yet heard from do not count against a CPU.
  CHECK(MoveOf({1, 1, 1, -1}, 0, {0, 1}) == 0);
  // 6 ranks on 3 CPUs: 4 on CPU 2, 2 on CPU 5, none on CPU 7: to CPU 7.
  CHECK(MoveOf({2, 2, 5, 2, 5, 2}, 0, {7, 2, 5}) == 7);
  // 5 ranks on 2 CPUs (a share of 3): 3 + 2 is as even as it gets.
  CHECK(MoveOf({0, 0, 0, 1, 1}, 0, {0, 1}) == -1);
  CHECK(MoveOf({0, 0, 0, 0, 1}, 0, {0, 1}) == 1);
}

TEST_CASE("the group counts each rank once, on the CPU it last waited on") {
  // More ranks than CPUs, so every wait says where it runs (and may move);
  // threads of this process stand in for the ranks.
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  const int cpus = CPU_COUNT(&allowed);
  const int n = std::max(4, 2 * cpus + 1);
  auto groups = MakeGroups(n, 1024);
  const auto errors = OnEveryRank<std::string>(n, [&](int rank) -> std::string {
    for (int i = 0; i < 50; ++i) {
      if (absl::Status s = internal::shm::Barrier(*groups[rank], Deadline()); !s.ok()) {
        return s.ToString();
      }
    }
    return "";
  });
  for (const std::string& e : errors) CHECK(e.empty());
  int counted = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    const int here = groups[0]->ranks_waiting_on(cpu);
    CHECK(here >= 0);
    counted += here;
  }
  // Each rank that waited is counted once, however often it moved. The last
  // arrival of a barrier does not wait, and one rank may have been last in
  // every barrier (never two: each barrier has one last arrival).
  CHECK(counted <= n);
  CHECK(counted >= n - 1);
  // Every rank sees the same counts: they live in the segment.
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    CHECK(groups[n - 1]->ranks_waiting_on(cpu) == groups[0]->ranks_waiting_on(cpu));
  }
  CHECK(groups[0]->ranks_waiting_on(-1) == 0);
}

TEST_CASE("a round's vote counts the ranks that said no, and only that round's") {
  const int n = 5;
  auto groups = MakeGroups(n, 1024);
  // Rounds 0-2 and 6-8 have no-votes, rounds 3-5 and 9-11 (the same sets
  // again) none: a set's old count must not leak into a later round.
  auto says_no = [](int round, int rank) {
    return (round / 3) % 2 == 0 && (round + rank) % 3 != 0;
  };
  const int rounds = 12;
  const auto seen = OnEveryRank<std::vector<int>>(n, [&](int rank) {
    std::vector<int> counts;
    for (int round = 0; round < rounds; ++round) {
      if (says_no(round, rank)) groups[rank]->VoteNo();
      if (!groups[rank]->Sync(Deadline()).ok()) return std::vector<int>{};
      counts.push_back(groups[rank]->no_votes());
      groups[rank]->NextRound();
    }
    return counts;
  });
  std::vector<int> want;
  for (int round = 0; round < rounds; ++round) {
    int no = 0;
    for (int rank = 0; rank < n; ++rank) no += says_no(round, rank) ? 1 : 0;
    want.push_back(no);
  }
  CHECK(want[0] > 0);
  CHECK(want[3] == 0);
  for (int rank = 0; rank < n; ++rank) CHECK(seen[rank] == want);
}

}  // namespace
}  // namespace horovodd
