// Tensors, float16 conversions and the element-wise reduction kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/tensor/float16.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd {
namespace {

using internal::FloatToHalf;
using internal::HalfToFloat;

TEST_CASE("tensor views and owning tensors report sizes", "[collectives][tensor]") {
  CHECK(DTypeSize(DType::kUInt8) == 1);
  CHECK(DTypeSize(DType::kFloat16) == 2);
  CHECK(DTypeSize(DType::kInt64) == 8);
  CHECK(std::string(DTypeName(DType::kFloat16)) == "float16");
  CHECK(std::string(ReduceOpName(ReduceOp::kProduct)) == "product");

  TensorView scalar;
  CHECK(scalar.numel() == 1);
  CHECK(scalar.row_numel() == 1);

  Tensor tensor(DType::kInt32, {3, 4, 5});
  CHECK(tensor.numel() == 60);
  CHECK(tensor.nbytes() == 240);
  TensorView view = tensor.view();
  CHECK(view.data == tensor.data());
  CHECK(view.row_numel() == 20);
  CHECK(view.nbytes() == 240);

  Tensor empty(DType::kFloat64, {0, 7});
  CHECK(empty.numel() == 0);
  CHECK(empty.nbytes() == 0);
}

TEST_CASE("float16 conversions follow IEEE binary16", "[collectives][float16]") {
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(-2.0f) == 0xc000);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);              // largest half
  CHECK(FloatToHalf(65520.0f) == 0x7c00);              // rounds up to infinity
  CHECK(FloatToHalf(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(FloatToHalf(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(FloatToHalf(std::ldexp(1.0f, -26)) == 0x0000);  // underflows
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  CHECK(FloatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);

  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    const float value = HalfToFloat(half);
    if (std::isnan(value)) continue;
    if (FloatToHalf(value) != half) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));
  CHECK(HalfToFloat(0x3555) == Approx(0.333251953125));
}

TEST_CASE("reduce kernels combine element-wise per dtype", "[collectives][kernels]") {
  SECTION("int32 sum wraps instead of overflowing") {
    std::vector<int32_t> acc = {std::numeric_limits<int32_t>::max(), -5};
    const std::vector<int32_t> in = {1, 3};
    internal::ReduceInto(DType::kInt32, ReduceOp::kSum, acc.data(), in.data(), acc.size());
    CHECK(acc == std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -2});
  }
  SECTION("uint8 product wraps modulo 256") {
    std::vector<uint8_t> acc = {16, 3};
    const std::vector<uint8_t> in = {17, 5};
    internal::ReduceInto(DType::kUInt8, ReduceOp::kProduct, acc.data(), in.data(), acc.size());
    CHECK(acc == std::vector<uint8_t>{16, 15});
  }
  SECTION("min and max on float64") {
    std::vector<double> low = {1.5, -2.0};
    std::vector<double> high = low;
    const std::vector<double> in = {0.5, 4.0};
    internal::ReduceInto(DType::kFloat64, ReduceOp::kMin, low.data(), in.data(), 2);
    internal::ReduceInto(DType::kFloat64, ReduceOp::kMax, high.data(), in.data(), 2);
    CHECK(low == std::vector<double>{0.5, -2.0});
    CHECK(high == std::vector<double>{1.5, 4.0});
  }
  SECTION("float16 sums through float") {
    std::vector<uint16_t> acc = {FloatToHalf(1.5f), FloatToHalf(-3.0f)};
    const std::vector<uint16_t> in = {FloatToHalf(2.25f), FloatToHalf(0.5f)};
    internal::ReduceInto(DType::kFloat16, ReduceOp::kSum, acc.data(), in.data(), 2);
    CHECK(HalfToFloat(acc[0]) == 3.75f);
    CHECK(HalfToFloat(acc[1]) == -2.5f);
  }
  SECTION("average divides by the rank count, integers truncating toward zero") {
    std::vector<int64_t> sums = {7, -7, 9};
    internal::FinishReduction(DType::kInt64, ReduceOp::kAverage, sums.data(), 3, 2, 1.0);
    CHECK(sums == std::vector<int64_t>{3, -3, 4});
    std::vector<uint8_t> bytes = {255};
    internal::FinishReduction(DType::kUInt8, ReduceOp::kAverage, bytes.data(), 1, 256, 1.0);
    CHECK(bytes[0] == 0);
    std::vector<float> floats = {7.0f};
    internal::FinishReduction(DType::kFloat32, ReduceOp::kAverage, floats.data(), 1, 2, 3.0);
    CHECK(floats[0] == 10.5f);  // postscale after the division
  }
  SECTION("scaling integers truncates and saturates") {
    std::vector<int32_t> values = {7, -7, 2000000000};
    internal::ScaleInPlace(DType::kInt32, values.data(), values.size(), 1.5);
    CHECK(values == std::vector<int32_t>{10, -10, std::numeric_limits<int32_t>::max()});
    std::vector<uint8_t> bytes = {10, 200};
    internal::ScaleInPlace(DType::kUInt8, bytes.data(), bytes.size(), -1.0);
    CHECK(bytes == std::vector<uint8_t>{0, 0});
  }
}

TEST_CASE("even splits give the first remainder parts one more", "[collectives][ring]") {
  CHECK(internal::EvenSplit(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(internal::EvenSplit(2, 3) == std::vector<int64_t>{1, 1, 0});
  CHECK(internal::EvenSplit(0, 2) == std::vector<int64_t>{0, 0});

  // Small chunks go whole: one segment each.
  internal::RingLayout layout(DType::kFloat32, {5, 4, 4});
  CHECK(layout.segments_per_chunk() == 1);
  CHECK(layout.segment_capacity() == 5);
  CHECK(layout.chunk(1).offset == 5);
  CHECK(layout.segment(1, 0).offset == 5);
  CHECK(layout.segment(1, 0).count == 4);
  // Past 64 KiB a chunk is cut in two (at least), the second segment short.
  internal::RingLayout halves(DType::kFloat32, {16385, 16384});
  CHECK(halves.segments_per_chunk() == 2);
  CHECK(halves.segment_capacity() == 8193);
  CHECK(halves.segment(1, 1).offset == 16385 + 8193);
  CHECK(halves.segment(1, 1).count == 8191);
  // 3 MiB chunks of float32 need three 1 MiB segments.
  internal::RingLayout big(DType::kFloat32, {786432, 786432});
  CHECK(big.segments_per_chunk() == 3);
}

}  // namespace
}  // namespace horovodd
