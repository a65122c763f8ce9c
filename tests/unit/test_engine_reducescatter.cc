// Reducescatter through the engine: requests negotiated by name like
// allreduces, fused with others of the same dtype, op and scale factors
// (shares that differ per rank and per tensor included), scaled as Horovod
// scales, and ranks that disagree on a tensor all get INVALID_ARGUMENT.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "test_engine_support.h"

namespace horovodd {
namespace {

using testing::EngineGroup;
using testing::OnEveryRank;

// Rows of `rows` that rank `rank` of `size` gets, and the first of them.
int64_t ShareRows(int64_t rows, int size, int rank) {
  return rows / size + (rank < rows % size ? 1 : 0);
}
int64_t ShareStart(int64_t rows, int size, int rank) {
  return rank * (rows / size) + std::min<int64_t>(rank, rows % size);
}

struct Shape {
  int64_t rows;
  int64_t row_numel;
};

// Small integers every dtype holds, different per rank, tensor and element.
double Value(int rank, int tensor, int64_t i) { return 1 + (rank * 3 + tensor + i) % 5; }

// Every rank enqueues a reducescatter per shape (its own order when
// `reverse_odd_ranks`), then checks its share of each.
std::vector<std::string> RunScatters(EngineGroup& group, DType dtype,
                                     const std::vector<Shape>& shapes,
                                     const AllreduceOptions& options, bool reverse_odd_ranks) {
  const int size = group.size();
  return OnEveryRank<std::string>(size, [&](int rank) -> std::string {
    std::vector<Tensor> inputs;
    for (size_t t = 0; t < shapes.size(); ++t) {
      inputs.push_back(testing::MakeTensor(dtype, {shapes[t].rows, shapes[t].row_numel},
                                           [&](int64_t i) { return Value(rank, t, i); }));
    }
    std::vector<Handle> handles(shapes.size());
    for (size_t k = 0; k < shapes.size(); ++k) {
      const size_t t = reverse_odd_ranks && rank % 2 == 1 ? shapes.size() - 1 - k : k;
      absl::StatusOr<Handle> h = group.engine(rank).Enqueue(
          testing::ReducescatterRequest(absl::StrCat("rs.", t), inputs[t].view(), options), false);
      if (!h.ok()) return h.status().ToString();
      handles[t] = *h;
    }
    for (size_t t = 0; t < shapes.size(); ++t) {
      absl::StatusOr<Tensor> share = handles[t].TakeOutput();
      if (!share.ok()) return share.status().ToString();
      const int64_t rows = ShareRows(shapes[t].rows, size, rank);
      if (share->shape() != std::vector<int64_t>{rows, shapes[t].row_numel}) {
        return absl::StrCat("rs.", t, ": share of shape [", share->shape()[0], ", ...]");
      }
      const int64_t first = ShareStart(shapes[t].rows, size, rank) * shapes[t].row_numel;
      std::string wrong = testing::FirstMismatch(*share, [&](int64_t i) {
        std::vector<double> values;
        for (int r = 0; r < size; ++r) {
          values.push_back(Value(r, t, first + i) * options.prescale_factor);
        }
        return testing::Reduce(options.op, dtype, values) * options.postscale_factor;
      });
      if (!wrong.empty()) return absl::StrCat("rs.", t, ": ", wrong);
    }
    return "";
  });
}

TEST_CASE("reducescatters fuse, with shares that differ per rank and per tensor",
          "[engine][reducescatter]") {
  // First dimensions that do and do not divide by the rank count, a tensor
  // some ranks get no rows of, and one larger than the small threshold.
  const std::vector<Shape> shapes = {{7, 3}, {2, 1}, {12, 5}, {1, 4}, {5000, 2}};
  for (int size : {2, 3}) {
    for (int64_t threshold : {int64_t{128} << 20, int64_t{0}, int64_t{1024}}) {
      EngineOptions engine_options;
      engine_options.fusion_threshold_bytes = threshold;
      EngineGroup group(size, engine_options);
      for (DType dtype : {DType::kFloat32, DType::kInt32, DType::kFloat16, DType::kFloat64}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
          AllreduceOptions options;
          options.op = op;
          INFO("size " << size << ", threshold " << threshold << ", " << DTypeName(dtype) << ", "
                       << ReduceOpName(op));
          for (const std::string& result : RunScatters(group, dtype, shapes, options, true)) {
            CHECK(result == "");
          }
        }
      }
    }
  }
}

TEST_CASE("fused reducescatters take the prescale and postscale", "[engine][reducescatter]") {
  EngineGroup group(3);
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  options.prescale_factor = 2.0;
  options.postscale_factor = 0.25;
  for (const std::string& result :
       RunScatters(group, DType::kFloat64, {{4, 2}, {5, 3}, {3, 1}}, options, false)) {
    CHECK(result == "");
  }
}

TEST_CASE("ranks that disagree on a reducescatter all get INVALID_ARGUMENT naming it",
          "[engine][reducescatter]") {
  EngineGroup group(2);
  std::vector<absl::Status> results = OnEveryRank<absl::Status>(2, [&](int rank) {
    Tensor input =
        testing::MakeTensor(DType::kFloat32, {rank == 1 ? 6 : 4, 2}, [](int64_t) { return 1.0; });
    absl::StatusOr<Handle> h =
        group.engine(rank).Enqueue(testing::ReducescatterRequest("rows", input.view()), false);
    return h.ok() ? h->Wait() : h.status();
  });
  for (const absl::Status& s : results) {
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("'rows'") &&
                                             Catch::Contains("reducescatter") &&
                                             Catch::Contains("[6, 2]"));
  }
}

}  // namespace
}  // namespace horovodd
