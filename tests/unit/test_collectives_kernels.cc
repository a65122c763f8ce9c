// Tensors, float16 conversions and the element-wise reduction kernels.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/tensor/float16.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd {
namespace {

using internal::BFloat16ToFloat;
using internal::FloatToBFloat16;
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
  CHECK(FloatToHalf(65504.0f) == 0x7bff);               // largest half
  CHECK(FloatToHalf(65520.0f) == 0x7c00);               // rounds up to infinity
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

TEST_CASE("dtypes Horovod takes on CPU have their sizes and names", "[collectives][tensor]") {
  CHECK(DTypeSize(DType::kInt8) == 1);
  CHECK(DTypeSize(DType::kInt16) == 2);
  CHECK(DTypeSize(DType::kBool) == 1);
  CHECK(DTypeSize(DType::kBFloat16) == 2);
  CHECK(std::string(DTypeName(DType::kInt8)) == "int8");
  CHECK(std::string(DTypeName(DType::kInt16)) == "int16");
  CHECK(std::string(DTypeName(DType::kBool)) == "bool");
  CHECK(std::string(DTypeName(DType::kBFloat16)) == "bfloat16");
  CHECK(DTypeReducible(DType::kBFloat16));
  CHECK(DTypeReducible(DType::kInt8));
  CHECK_FALSE(DTypeReducible(DType::kBool));
}

TEST_CASE("bfloat16 conversions round to nearest even like torch", "[collectives][bfloat16]") {
  CHECK(FloatToBFloat16(1.0f) == 0x3f80);
  CHECK(FloatToBFloat16(-2.0f) == 0xc000);
  CHECK(BFloat16ToFloat(0x3f80) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1).
  CHECK(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(FloatToBFloat16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  // The largest float rounds to infinity, as torch's conversion does.
  CHECK(FloatToBFloat16(std::numeric_limits<float>::max()) == 0x7f80);
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float value = BFloat16ToFloat(b);
    if (std::isnan(value)) continue;
    if (FloatToBFloat16(value) != b) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("reduce kernels on int8, int16 and bfloat16", "[collectives][kernels]") {
  SECTION("int8 sum wraps, min and max compare signed") {
    std::vector<int8_t> acc = {127, -100, 5};
    const std::vector<int8_t> in = {1, -100, -6};
    std::vector<int8_t> low = acc, high = acc;
    internal::ReduceInto(DType::kInt8, ReduceOp::kSum, acc.data(), in.data(), 3);
    CHECK(acc == std::vector<int8_t>{-128, 56, -1});
    internal::ReduceInto(DType::kInt8, ReduceOp::kMin, low.data(), in.data(), 3);
    internal::ReduceInto(DType::kInt8, ReduceOp::kMax, high.data(), in.data(), 3);
    CHECK(low == std::vector<int8_t>{1, -100, -6});
    CHECK(high == std::vector<int8_t>{127, -100, 5});
  }
  SECTION("int16 product and average") {
    std::vector<int16_t> acc = {300, -7};
    const std::vector<int16_t> in = {100, 3};
    internal::ReduceInto(DType::kInt16, ReduceOp::kProduct, acc.data(), in.data(), 2);
    CHECK(acc == std::vector<int16_t>{static_cast<int16_t>(30000), -21});
    std::vector<int16_t> sums = {9, -9};
    internal::FinishReduction(DType::kInt16, ReduceOp::kAverage, sums.data(), 2, 2, 1.0);
    CHECK(sums == std::vector<int16_t>{4, -4});
  }
  SECTION("int8 scaling saturates at the type's limits") {
    std::vector<int8_t> values = {100, -100, 3};
    internal::ScaleInPlace(DType::kInt8, values.data(), values.size(), 2.0);
    CHECK(values == std::vector<int8_t>{127, -128, 6});
  }
  SECTION("bfloat16 sums in float32 and rounds once per step") {
    // 256 + 1 is not a bfloat16 (8 significant bits): the sum rounds to even.
    std::vector<uint16_t> acc = {FloatToBFloat16(256.0f), FloatToBFloat16(1.5f)};
    const std::vector<uint16_t> in = {FloatToBFloat16(1.0f), FloatToBFloat16(2.25f)};
    internal::ReduceInto(DType::kBFloat16, ReduceOp::kSum, acc.data(), in.data(), 2);
    CHECK(BFloat16ToFloat(acc[0]) == 256.0f);
    CHECK(BFloat16ToFloat(acc[1]) == 3.75f);
    std::vector<uint16_t> values = {FloatToBFloat16(3.0f)};
    internal::FinishReduction(DType::kBFloat16, ReduceOp::kAverage, values.data(), 1, 2, 4.0);
    CHECK(BFloat16ToFloat(values[0]) == 6.0f);
  }
  SECTION("bfloat16 min, max and product") {
    const std::vector<uint16_t> in = {FloatToBFloat16(-1.0f), FloatToBFloat16(8.0f)};
    std::vector<uint16_t> low = {FloatToBFloat16(2.0f), FloatToBFloat16(0.5f)};
    std::vector<uint16_t> high = low, product = low;
    internal::ReduceInto(DType::kBFloat16, ReduceOp::kMin, low.data(), in.data(), 2);
    internal::ReduceInto(DType::kBFloat16, ReduceOp::kMax, high.data(), in.data(), 2);
    internal::ReduceInto(DType::kBFloat16, ReduceOp::kProduct, product.data(), in.data(), 2);
    CHECK(BFloat16ToFloat(low[0]) == -1.0f);
    CHECK(BFloat16ToFloat(low[1]) == 0.5f);
    CHECK(BFloat16ToFloat(high[0]) == 2.0f);
    CHECK(BFloat16ToFloat(high[1]) == 8.0f);
    CHECK(BFloat16ToFloat(product[0]) == -2.0f);
    CHECK(BFloat16ToFloat(product[1]) == 4.0f);
  }
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
  SECTION("scaling is Horovod's: the factor in the element's type") {
    // 0.1 is not a float: scaling in double and rounding once gives other
    // bits than float(0.1) * x, which is what Horovod computes.
    std::vector<float> floats = {3.0f, 7.0f, 1e-3f};
    internal::ScaleInPlace(DType::kFloat32, floats.data(), floats.size(), 0.1);
    for (size_t i = 0; i < floats.size(); ++i) {
      const float base = std::vector<float>{3.0f, 7.0f, 1e-3f}[i];
      CHECK(floats[i] == 0.1f * base);
    }
    std::vector<double> doubles = {3.0, 7.0};
    internal::ScaleInPlace(DType::kFloat64, doubles.data(), doubles.size(), 0.1);
    CHECK(doubles == std::vector<double>{0.1 * 3.0, 0.1 * 7.0});
    // float16: float(factor) times the element widened to float, rounded once.
    std::vector<uint16_t> halves = {FloatToHalf(3.0f), FloatToHalf(-7.5f)};
    internal::ScaleInPlace(DType::kFloat16, halves.data(), halves.size(), 0.1);
    CHECK(halves[0] == FloatToHalf(0.1f * 3.0f));
    CHECK(halves[1] == FloatToHalf(0.1f * -7.5f));
    // An average is the sum times postscale / ranks, in that same way.
    std::vector<float> sums = {10.0f, 1.0f};
    internal::FinishReduction(DType::kFloat32, ReduceOp::kAverage, sums.data(), 2, 3, 1.0);
    CHECK(sums[0] == static_cast<float>(1.0 / 3) * 10.0f);
    CHECK(sums[1] == static_cast<float>(1.0 / 3));
    // Integers in double, truncated toward zero.
    std::vector<int32_t> ints = {7, -7, 5};
    internal::FinishReduction(DType::kInt32, ReduceOp::kAverage, ints.data(), 3, 2, 0.7);
    CHECK(ints == std::vector<int32_t>{2, -2, 1});  // 7 * 0.35 = 2.45, 5 * 0.35 = 1.75
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
// The kernels run as the widest vector clone this CPU has (AVX-512 or AVX2
// on most x86 machines): each element must still get the bits of the
// scalar operation, at every length and alignment a vector loop splits
// into a body and a tail, NaNs and signed zeros included.
TEST_CASE("vectorized kernels give each element the scalar operation's bits",
          "[collectives][kernels]") {
  // Inexact values, and every few elements a signed zero or a NaN: where a
  // vector min or max could pick the other operand than `b < a ? b : a`.
  auto inexact = [](int64_t i, int salt) {
    switch ((i * 5 + salt) % 11) {
      case 0:
        return 0.0;
      case 1:
        return -0.0;
      case 2:
        return std::nan("");
      default:
        return 1.0 / (3.0 + static_cast<double>((i * 13 + salt * 7) % 29)) - 0.04 * salt;
    }
  };
  for (const int64_t count : {int64_t{1}, int64_t{7}, int64_t{31}, int64_t{64}, int64_t{1001}}) {
    for (const int64_t skew : {int64_t{0}, int64_t{1}, int64_t{3}}) {
      CAPTURE(count, skew);
      std::vector<float> acc(count + skew), in(count + skew);
      std::vector<double> acc64(count + skew), in64(count + skew);
      for (int64_t i = 0; i < count + skew; ++i) {
        acc[i] = static_cast<float>(inexact(i, 1));
        in[i] = static_cast<float>(inexact(i, 2));
        acc64[i] = inexact(i, 1);
        in64[i] = inexact(i, 2);
      }
      for (const ReduceOp op :
           {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
        auto scalar = [op](auto a, auto b) {
          switch (op) {
            case ReduceOp::kProduct:
              return a * b;
            case ReduceOp::kMin:
              return b < a ? b : a;
            case ReduceOp::kMax:
              return a < b ? b : a;
            default:
              return a + b;
          }
        };
        std::vector<float> got(acc);
        std::vector<double> got64(acc64);
        internal::ReduceInto(DType::kFloat32, op, got.data() + skew, in.data() + skew, count);
        internal::ReduceInto(DType::kFloat64, op, got64.data() + skew, in64.data() + skew, count);
        int mismatches = 0;
        for (int64_t i = skew; i < count + skew; ++i) {
          const float want = scalar(acc[i], in[i]);
          const double want64 = scalar(acc64[i], in64[i]);
          mismatches += std::memcmp(&got[i], &want, sizeof(float)) != 0;
          mismatches += std::memcmp(&got64[i], &want64, sizeof(double)) != 0;
        }
        CHECK(mismatches == 0);
      }
      // Average with a postscale, and a prescale, as Horovod scales: the
      // factor (postscale / ranks for the average) cast to float, the
      // product taken in float.
      std::vector<float> finished(acc);
      internal::FinishReduction(DType::kFloat32, ReduceOp::kAverage, finished.data() + skew, count,
                                3, 1.7);
      std::vector<float> scaled(acc);
      internal::ScaleInPlace(DType::kFloat32, scaled.data() + skew, count, 0.3);
      int mismatches = 0;
      for (int64_t i = skew; i < count + skew; ++i) {
        const float want_finished = static_cast<float>(1.7 / 3) * acc[i];
        const float want_scaled = static_cast<float>(0.3) * acc[i];
        mismatches += std::memcmp(&finished[i], &want_finished, sizeof(float)) != 0;
        mismatches += std::memcmp(&scaled[i], &want_scaled, sizeof(float)) != 0;
      }
      CHECK(mismatches == 0);
    }
  }
}

}  // namespace horovodd
