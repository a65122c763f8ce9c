// Every collective, every dtype, on 2, 3 and 4 in-process ranks, against
// values computed locally.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd {
namespace {

using testing::FirstMismatch;
using testing::kAllDTypes;
using testing::kAllReduceOps;
using testing::kMovableDTypes;
using testing::MakeTensor;
using testing::OnEveryRank;
using testing::RankGroup;
using testing::Reduce;

// Small positive values so sums and products stay exact in every dtype.
double Value(int rank, int64_t i) { return static_cast<double>((rank + i) % 3 + 1); }

// Runs one allreduce on every rank of `group` and returns what each rank
// got wrong ("" when right), or the status when the call failed.
std::vector<std::string> CheckAllreduce(RankGroup& group, DType dtype, int64_t count,
                                        const AllreduceOptions& options) {
  const int n = group.size();
  return OnEveryRank<std::string>(n, [&](int rank) -> std::string {
    Tensor tensor = MakeTensor(dtype, {count}, [&](int64_t i) { return Value(rank, i); });
    absl::Status status = internal::Allreduce(group.context(rank), tensor.view(), options);
    if (!status.ok()) return status.ToString();
    return FirstMismatch(tensor, [&](int64_t i) {
      std::vector<double> contributions;
      for (int r = 0; r < n; ++r) contributions.push_back(Value(r, i) * options.prescale_factor);
      return Reduce(options.op, dtype, contributions) * options.postscale_factor;
    });
  });
}

TEST_CASE("allreduce: every op and dtype on 2, 3 and 4 ranks", "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("allreduce", size), size);
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        // Small ones go to every peer directly; 70000 elements (but int8 at
        // 3-4 ranks) take the pairwise exchange.
        for (int64_t count : {1, 7, 1000, 70000}) {
          AllreduceOptions options;
          options.op = op;
          options.name = "grads";
          INFO("size " << size << ", " << DTypeName(dtype) << ", " << ReduceOpName(op) << ", "
                       << count << " elements");
          for (const std::string& problem : CheckAllreduce(group, dtype, count, options)) {
            CHECK(problem == "");
          }
        }
      }
    }
  }
}

TEST_CASE("allreduce: every rank ends with the same bits, small or large",
          "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  // Sums of these round differently in different orders.
  auto value = [](int rank, int64_t i) { return 1.0f / static_cast<float>(rank + i % 7 + 3); };
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("same-bits", size), size);
    // Direct, pairwise, then (past what the pairwise exchange keeps in its
    // scratch pool, 16 MiB) the ring.
    for (int64_t count : {int64_t{100}, int64_t{200000}, int64_t{4500000}}) {
      INFO(size << " ranks, " << count << " elements");
      std::vector<std::vector<float>> results =
          OnEveryRank<std::vector<float>>(size, [&](int rank) {
            std::vector<float> values(count);
            for (int64_t i = 0; i < count; ++i) values[i] = value(rank, i);
            AllreduceOptions sum;
            sum.op = ReduceOp::kSum;
            absl::Status status = internal::Allreduce(group.context(rank), ViewOf(values), sum);
            if (!status.ok()) values.clear();
            return values;
          });
      REQUIRE(results[0].size() == static_cast<size_t>(count));
      for (int rank = 1; rank < size; ++rank) CHECK(results[rank] == results[0]);
      float expected = 0;
      for (int rank = 0; rank < size; ++rank) expected += 1.0f / static_cast<float>(rank + 3);
      CHECK(results[0][0] == Approx(expected));
      if (count > 200000) continue;  // the ring folds in ring order
      // Direct and pairwise: rank 0's value, then rank 1's, ..., exactly.
      int64_t mismatches = 0;
      for (int64_t i = 0; i < count; ++i) {
        float fold = value(0, i);
        for (int rank = 1; rank < size; ++rank) fold += value(rank, i);
        if (results[0][i] != fold) ++mismatches;
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("allreduce: zero elements and scalars", "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "zero", 3);
  auto results = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    Tensor empty(DType::kFloat32, {0, 5});
    absl::Status status = internal::Allreduce(group.context(rank), empty.view(), {});
    if (!status.ok()) return status.ToString();
    // A scalar (shape {}) is one element.
    Tensor scalar = MakeTensor(DType::kInt64, {}, [&](int64_t) { return rank + 1; });
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    status = internal::Allreduce(group.context(rank), scalar.view(), sum);
    if (!status.ok()) return status.ToString();
    return FirstMismatch(scalar, [](int64_t) { return 6; });
  });
  for (const std::string& problem : results) CHECK(problem == "");
}

TEST_CASE("allreduce: several MiB", "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("big", size), size);
    struct Case {
      DType dtype;
      ReduceOp op;
      int64_t count;
    };
    // 3 MiB of float32 plus a remainder, 2 MiB of float16, 4 MiB of int64.
    for (const Case& c : {Case{DType::kFloat32, ReduceOp::kSum, 786432 + 13},
                          Case{DType::kFloat16, ReduceOp::kAverage, 1048576},
                          Case{DType::kInt64, ReduceOp::kMax, 524288 + 1}}) {
      AllreduceOptions options;
      options.op = c.op;
      INFO("size " << size << ", " << DTypeName(c.dtype) << ", " << c.count << " elements");
      for (const std::string& problem : CheckAllreduce(group, c.dtype, c.count, options)) {
        CHECK(problem == "");
      }
    }
  }
}

TEST_CASE("allreduce: prescale and postscale", "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "scale", 3);
  struct Case {
    DType dtype;
    ReduceOp op;
    double prescale;
    double postscale;
  };
  for (const Case& c : {Case{DType::kFloat32, ReduceOp::kSum, 0.5, 3.0},
                        Case{DType::kFloat64, ReduceOp::kAverage, 1.0, 2.0},
                        Case{DType::kFloat16, ReduceOp::kAverage, 4.0, 0.25},
                        Case{DType::kInt32, ReduceOp::kSum, 2.0, 1.0},
                        Case{DType::kInt64, ReduceOp::kAverage, 1.0, 3.0}}) {
    AllreduceOptions options;
    options.op = c.op;
    options.prescale_factor = c.prescale;
    options.postscale_factor = c.postscale;
    INFO(DTypeName(c.dtype) << " " << ReduceOpName(c.op) << " prescale " << c.prescale
                            << " postscale " << c.postscale);
    for (int64_t count : {11, 100000}) {  // direct, pairwise
      for (const std::string& problem : CheckAllreduce(group, c.dtype, count, options)) {
        CHECK(problem == "");
      }
    }
  }
}

TEST_CASE("allreduce if all ready: every rank ready gets Allreduce's bits",
          "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "in-band", 3);
  AllreduceOptions options;
  options.op = ReduceOp::kAverage;
  options.postscale_factor = 3.0;
  const int64_t count = 300000;  // pairwise at 3 ranks
  auto input_of = [&](int rank) {
    std::vector<float> values(count);
    for (int64_t i = 0; i < count; ++i) values[i] = 1.0f / static_cast<float>(rank + i % 7 + 3);
    return values;
  };
  std::vector<std::string> problems = OnEveryRank<std::string>(3, [&](int rank) {
    std::vector<float> tensor = input_of(rank), whole = input_of(rank);
    internal::GlooContext& context = group.context(rank);
    if (!internal::AllreduceConfirmsItself(context, ViewOf(tensor), options)) {
      return std::string("does not confirm itself");
    }
    absl::StatusOr<bool> all =
        internal::AllreduceIfAllReady(context, ViewOf(tensor), true, options);
    if (!all.ok()) return all.status().ToString();
    if (!*all) return std::string("not confirmed though every rank was ready");
    absl::Status status = internal::Allreduce(context, ViewOf(whole), options);
    if (!status.ok()) return status.ToString();
    if (tensor != whole) return std::string("the result differs from Allreduce's");
    return std::string();
  });
  for (const std::string& problem : problems) CHECK(problem == "");
}

TEST_CASE("allreduce if all ready: one rank not ready, nothing written anywhere",
          "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 4}) {
    RankGroup group(store, absl::StrCat("in-band-refused", size), size);
    const int64_t count = 400000;  // pairwise at 2 and 4 ranks
    const int not_ready = size - 1;
    std::vector<std::string> problems = OnEveryRank<std::string>(size, [&](int rank) {
      const std::vector<float> original(count, static_cast<float>(rank + 1));
      std::vector<float> tensor = original;
      absl::StatusOr<bool> all = internal::AllreduceIfAllReady(
          group.context(rank), ViewOf(tensor), rank != not_ready, AllreduceOptions{});
      if (!all.ok()) return all.status().ToString();
      if (*all) return std::string("confirmed though a rank was not ready");
      if (tensor != original) return std::string("the tensor was written");
      // The ring is still in step: a plain allreduce after it is exact.
      std::vector<float> one(5, 1.0f);
      AllreduceOptions sum;
      sum.op = ReduceOp::kSum;
      absl::Status status = internal::Allreduce(group.context(rank), ViewOf(one), sum);
      if (!status.ok()) return status.ToString();
      if (one[4] != static_cast<float>(size)) return absl::StrCat("then allreduce gave ", one[4]);
      return std::string();
    });
    INFO(size << " ranks");
    for (const std::string& problem : problems) CHECK(problem == "");
  }
}

TEST_CASE("allreduce if all ready: not for the direct or ring algorithms, nor a prescale",
          "[collectives][allreduce]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "in-band-ring", 2);
  const internal::GlooContext& two = group.context(0);
  AllreduceOptions prescaled;
  prescaled.prescale_factor = 0.5;
  std::vector<float> small(1000), medium(400000);
  CHECK_FALSE(internal::AllreduceConfirmsItself(two, ViewOf(small), {}));  // direct
  CHECK(internal::AllreduceConfirmsItself(two, ViewOf(medium), {}));
  CHECK_FALSE(internal::AllreduceConfirmsItself(two, ViewOf(medium), prescaled));
  // 16 MiB and 8 bytes: each rank's chunk, twice, no longer fits the scratch
  // pool (16 MiB), so the ring.
  const size_t count = (size_t{1} << 22) + 2;
  std::vector<float> big(count);
  const TensorView sixteen_mib{big.data(), DType::kFloat32, {int64_t{1} << 22}, Device{}};
  CHECK(internal::AllreduceConfirmsItself(two, sixteen_mib, {}));
  CHECK_FALSE(internal::AllreduceConfirmsItself(two, ViewOf(big), {}));

  std::vector<absl::Status> results = OnEveryRank<absl::Status>(2, [&](int rank) {
    std::vector<float> tensor(count);
    return internal::AllreduceIfAllReady(group.context(rank), ViewOf(tensor), true, {}).status();
  });
  for (const absl::Status& status : results) {
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(status.message().find("only the pairwise allreduce") != std::string::npos);
  }
}

TEST_CASE("allgather: ranks contribute different first dimensions", "[collectives][allgather]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("allgather", size), size);
    // Rank r contributes r rows of 3 (rank 0 none), or ~1 MiB each when big.
    for (int64_t scale : {1, 30000}) {
      for (DType dtype : kMovableDTypes) {
        auto rows_of = [&](int rank) { return rank * scale; };
        auto value = [](int rank, int64_t i) { return static_cast<double>((rank * 7 + i) % 100); };
        auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
          Tensor input =
              MakeTensor(dtype, {rows_of(rank), 3}, [&](int64_t i) { return value(rank, i); });
          absl::StatusOr<Tensor> output = internal::Allgather(group.context(rank), input.view());
          if (!output.ok()) return output.status().ToString();
          int64_t total_rows = 0;
          for (int r = 0; r < size; ++r) total_rows += rows_of(r);
          if (output->shape() != std::vector<int64_t>{total_rows, 3}) return "wrong shape";
          return FirstMismatch(*output, [&](int64_t i) {
            int source = 0;
            int64_t local = i;
            while (local >= rows_of(source) * 3) local -= rows_of(source++) * 3;
            return value(source, local);
          });
        });
        INFO("size " << size << ", " << DTypeName(dtype) << ", rows per rank x" << scale);
        for (const std::string& problem : results) CHECK(problem == "");
      }
    }
  }
}

TEST_CASE("allgather: nothing at all to gather", "[collectives][allgather]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "allgather-empty", 2);
  auto shapes = OnEveryRank<std::vector<int64_t>>(2, [&](int rank) {
    Tensor input(DType::kInt32, {0, 4});
    absl::StatusOr<Tensor> output = internal::Allgather(group.context(rank), input.view());
    return output.ok() ? output->shape() : std::vector<int64_t>{-1};
  });
  for (const auto& shape : shapes) CHECK(shape == std::vector<int64_t>{0, 4});
}

TEST_CASE("broadcast: from every root, every dtype", "[collectives][broadcast]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("broadcast", size), size);
    for (DType dtype : kMovableDTypes) {
      for (int root = 0; root < size; ++root) {
        for (int64_t count : {int64_t{0}, int64_t{5}, int64_t{1} << 20}) {
          auto value = [](int rank, int64_t i) {
            return static_cast<double>((rank * 11 + i) % 50);
          };
          auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
            Tensor tensor = MakeTensor(dtype, {count}, [&](int64_t i) { return value(rank, i); });
            absl::Status status = internal::Broadcast(group.context(rank), tensor.view(), root);
            if (!status.ok()) return status.ToString();
            return FirstMismatch(tensor, [&](int64_t i) { return value(root, i); });
          });
          INFO("size " << size << ", " << DTypeName(dtype) << ", root " << root << ", " << count
                       << " elements");
          for (const std::string& problem : results) CHECK(problem == "");
        }
      }
    }
  }
}

TEST_CASE("alltoall: uneven splits, received splits, equal default", "[collectives][alltoall]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("alltoall", size), size);
    // Rank s sends (s + d) % 3 rows (times `scale`) to rank d; a row's two
    // values say where it came from: 100 * s + d and its index in that block.
    for (int64_t scale : {1, 50000}) {
      for (DType dtype : kMovableDTypes) {
        auto rows = [&](int s, int d) { return ((s + d) % 3) * scale; };
        auto encode = [&](int s, int d, int64_t row, int column) {
          return column == 0 ? static_cast<double>((100 * s + d) % 250)
                             : static_cast<double>(row % 200);
        };
        struct Result {
          std::string problem;
          std::vector<int64_t> received;
        };
        auto results = OnEveryRank<Result>(size, [&](int rank) -> Result {
          std::vector<int64_t> splits(size);
          int64_t total = 0;
          for (int d = 0; d < size; ++d) total += splits[d] = rows(rank, d);
          Tensor input(dtype, {total, 2});
          int64_t row = 0;
          for (int d = 0; d < size; ++d) {
            for (int64_t k = 0; k < splits[d]; ++k, ++row) {
              testing::SetElement(input.data(), dtype, 2 * row, encode(rank, d, k, 0));
              testing::SetElement(input.data(), dtype, 2 * row + 1, encode(rank, d, k, 1));
            }
          }
          Result result;
          absl::StatusOr<Tensor> output =
              internal::Alltoall(group.context(rank), input.view(), splits, &result.received);
          if (!output.ok()) return {output.status().ToString(), {}};
          std::vector<double> expected;
          for (int s = 0; s < size; ++s) {
            for (int64_t k = 0; k < rows(s, rank); ++k) {
              expected.push_back(encode(s, rank, k, 0));
              expected.push_back(encode(s, rank, k, 1));
            }
          }
          if (output->numel() != static_cast<int64_t>(expected.size())) {
            return {absl::StrCat("got ", output->numel(), " elements, want ", expected.size()), {}};
          }
          result.problem = FirstMismatch(*output, [&](int64_t i) { return expected[i]; });
          return result;
        });
        for (int rank = 0; rank < size; ++rank) {
          INFO("size " << size << ", " << DTypeName(dtype) << ", rank " << rank << ", x" << scale);
          CHECK(results[rank].problem == "");
          std::vector<int64_t> want;
          for (int s = 0; s < size; ++s) want.push_back(rows(s, rank));
          CHECK(results[rank].received == want);
        }
      }
    }
    auto equal = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
      Tensor input =
          MakeTensor(DType::kInt64, {2 * size}, [&](int64_t i) { return rank * 10 + i; });
      absl::StatusOr<Tensor> output =
          internal::Alltoall(group.context(rank), input.view(), {}, nullptr);
      if (!output.ok()) return output.status().ToString();
      return FirstMismatch(*output, [&](int64_t i) { return (i / 2) * 10 + 2 * rank + i % 2; });
    });
    for (const std::string& problem : equal) CHECK(problem == "");
  }
}

TEST_CASE("reducescatter: rows not divisible by the size, every op and dtype",
          "[collectives][reducescatter]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("reducescatter", size), size);
    const int64_t rows = 2 * size + 1;  // the first rank gets one row more
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
          Tensor input = MakeTensor(dtype, {rows, 2}, [&](int64_t i) { return Value(rank, i); });
          absl::StatusOr<Tensor> output =
              internal::Reducescatter(group.context(rank), input.view(), {op});
          if (!output.ok()) return output.status().ToString();
          const int64_t my_rows = rank == 0 ? 3 : 2;
          const int64_t first_row = rank == 0 ? 0 : 3 + 2 * (rank - 1);
          if (output->shape() != std::vector<int64_t>{my_rows, 2}) return "wrong shape";
          return FirstMismatch(*output, [&](int64_t i) {
            std::vector<double> contributions;
            for (int r = 0; r < size; ++r) contributions.push_back(Value(r, first_row * 2 + i));
            return Reduce(op, dtype, contributions);
          });
        });
        INFO("size " << size << ", " << DTypeName(dtype) << ", " << ReduceOpName(op));
        for (const std::string& problem : results) CHECK(problem == "");
      }
    }
  }
}

TEST_CASE("reducescatter: scaling, zero rows and several MiB", "[collectives][reducescatter]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "reducescatter-misc", 3);
  auto scaled = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    Tensor input = MakeTensor(DType::kFloat32, {4}, [&](int64_t i) { return rank + i; });
    absl::StatusOr<Tensor> output =
        internal::Reducescatter(group.context(rank), input.view(), {ReduceOp::kAverage, 2.0, 10.0});
    if (!output.ok()) return output.status().ToString();
    const int64_t first = rank == 0 ? 0 : rank + 1;
    // average of 2*(r + i) over r = 0..2 is 2*(1 + i); times 10.
    return FirstMismatch(*output, [&](int64_t i) { return 20.0 * (1 + first + i); });
  });
  for (const std::string& problem : scaled) CHECK(problem == "");

  auto empty = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    Tensor input(DType::kInt32, {0, 3});
    absl::StatusOr<Tensor> output =
        internal::Reducescatter(group.context(rank), input.view(), {ReduceOp::kSum});
    if (!output.ok()) return output.status().ToString();
    return output->shape() == std::vector<int64_t>{0, 3} ? "" : "wrong shape";
  });
  for (const std::string& problem : empty) CHECK(problem == "");

  const int64_t rows = 1 << 20;  // 4 MiB of float32
  auto big = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    Tensor input = MakeTensor(DType::kFloat32, {rows}, [&](int64_t i) { return Value(rank, i); });
    absl::StatusOr<Tensor> output =
        internal::Reducescatter(group.context(rank), input.view(), {ReduceOp::kSum});
    if (!output.ok()) return output.status().ToString();
    const int64_t first = rank * (rows / 3) + std::min<int64_t>(rank, rows % 3);
    return FirstMismatch(*output, [&](int64_t i) {
      return Value(0, first + i) + Value(1, first + i) + Value(2, first + i);
    });
  });
  for (const std::string& problem : big) CHECK(problem == "");
}

TEST_CASE("bool tensors are refused by the reductions, as in Horovod", "[collectives][bool]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "bool-reductions", 2);
  auto results = OnEveryRank<std::vector<std::string>>(2, [&](int rank) {
    Tensor tensor = MakeTensor(DType::kBool, {4, 2}, [&](int64_t i) { return (i + rank) % 2; });
    AllreduceOptions options;
    options.op = ReduceOp::kMax;
    options.name = "flags";
    const absl::Status reduced = internal::Allreduce(group.context(rank), tensor.view(), options);
    const absl::Status scattered =
        internal::Reducescatter(group.context(rank), tensor.view(), {ReduceOp::kSum}).status();
    return std::vector<std::string>{std::string(reduced.message()),
                                    std::string(scattered.message())};
  });
  for (const auto& messages : results) {
    CHECK(messages[0] ==
          "allreduce 'flags': bool tensors cannot be reduced (as in Horovod, bool is supported "
          "by broadcast, allgather and alltoall only)");
    CHECK(messages[1].find("reducescatter: bool tensors cannot be reduced") == 0);
  }
}

TEST_CASE("barrier: no rank leaves before every rank arrived", "[collectives][barrier]") {
  gloo::rendezvous::HashStore store;
  for (int size : {2, 3, 4}) {
    RankGroup group(store, absl::StrCat("barrier", size), size);
    constexpr int kRounds = 20;
    std::vector<std::atomic<int>> arrived(kRounds);
    auto seen = OnEveryRank<std::vector<int>>(size, [&](int rank) {
      std::vector<int> counts;
      for (int round = 0; round < kRounds; ++round) {
        arrived[round].fetch_add(1);
        absl::Status status = internal::Barrier(group.context(rank));
        counts.push_back(status.ok() ? arrived[round].load() : -1);
      }
      return counts;
    });
    for (const auto& counts : seen) CHECK(counts == std::vector<int>(kRounds, size));
  }
}

TEST_CASE("consecutive collectives of every kind never mix", "[collectives]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "mixed", 3);
  auto results = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    internal::GlooContext& context = group.context(rank);
    for (int round = 0; round < 25; ++round) {
      Tensor sum = MakeTensor(DType::kInt32, {9}, [&](int64_t i) { return round * rank + i; });
      AllreduceOptions options;
      options.op = ReduceOp::kSum;
      if (absl::Status s = internal::Allreduce(context, sum.view(), options); !s.ok()) {
        return s.ToString();
      }
      std::string problem = FirstMismatch(sum, [&](int64_t i) { return round * 3 + 3 * i; });
      if (!problem.empty()) return absl::StrCat("allreduce round ", round, ": ", problem);

      Tensor mine = MakeTensor(DType::kInt32, {rank}, [&](int64_t) { return round + rank; });
      absl::StatusOr<Tensor> gathered = internal::Allgather(context, mine.view());
      if (!gathered.ok()) return gathered.status().ToString();
      problem = FirstMismatch(*gathered, [&](int64_t i) { return round + (i == 0 ? 1 : 2); });
      if (!problem.empty()) return absl::StrCat("allgather round ", round, ": ", problem);

      Tensor shared = MakeTensor(DType::kInt32, {4}, [&](int64_t) { return rank + round; });
      if (absl::Status s = internal::Broadcast(context, shared.view(), round % 3); !s.ok()) {
        return s.ToString();
      }
      problem = FirstMismatch(shared, [&](int64_t) { return round % 3 + round; });
      if (!problem.empty()) return absl::StrCat("broadcast round ", round, ": ", problem);

      if (absl::Status s = internal::Barrier(context); !s.ok()) return s.ToString();
    }
    return "";
  });
  for (const std::string& problem : results) CHECK(problem == "");
}

}  // namespace
}  // namespace horovodd
