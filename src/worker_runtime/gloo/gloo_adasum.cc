#include "worker_runtime/gloo/gloo_adasum.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/tensor/float16.h"

namespace horovodd::internal {
namespace {

// Elements [begin, end) of the tensor.
struct Segment {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// The halves of `parent` at one level: the lower rank of the pair keeps the
// first, the upper one the second.
std::pair<Segment, Segment> Halves(const Segment& parent, bool lower) {
  const size_t middle = parent.begin + parent.size() / 2;
  const Segment first{parent.begin, middle};
  const Segment second{middle, parent.end};
  return lower ? std::make_pair(first, second) : std::make_pair(second, first);
}

absl::StatusOr<std::vector<double>> ToDoubles(const TensorView& t, double scale) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<double> values(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kFloat64:
        values[i] = static_cast<const double*>(t.data)[i];
        break;
      case DType::kFloat32:
        values[i] = static_cast<const float*>(t.data)[i];
        break;
      case DType::kFloat16:
        values[i] = HalfToFloat(static_cast<const uint16_t*>(t.data)[i]);
        break;
      case DType::kBFloat16:
        values[i] = BFloat16ToFloat(static_cast<const uint16_t*>(t.data)[i]);
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Adasum combines float16, bfloat16, float32 and float64 tensors, not ",
                         DTypeName(t.dtype)));
    }
    values[i] *= scale;
  }
  return values;
}

void FromDoubles(const std::vector<double>& values, double scale, TensorView& t) {
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i] * scale;
    switch (t.dtype) {
      case DType::kFloat64:
        static_cast<double*>(t.data)[i] = v;
        break;
      case DType::kFloat32:
        static_cast<float*>(t.data)[i] = static_cast<float>(v);
        break;
      case DType::kFloat16:
        static_cast<uint16_t*>(t.data)[i] = FloatToHalf(static_cast<float>(v));
        break;
      case DType::kBFloat16:
        static_cast<uint16_t*>(t.data)[i] = FloatToBFloat16(static_cast<float>(v));
        break;
      default:
        break;  // ToDoubles refused it
    }
  }
}

// Sends `give` of `send` to `peer` and receives `keep` of `recv` from it (the
// peer's give is our keep); empty regions move nothing, on both sides alike.
absl::Status Swap(CollectiveScope& scope, gloo::transport::UnboundBuffer& send,
                  gloo::transport::UnboundBuffer& recv, int peer, const Segment& give,
                  const Segment& keep) {
  constexpr size_t kDouble = sizeof(double);
  if (give.size() > 0) {
    HVDD_RETURN_IF_ERROR(
        scope.Send(send, peer, give.begin * kDouble, give.size() * kDouble, Channel::kData));
  }
  if (keep.size() > 0) {
    HVDD_RETURN_IF_ERROR(
        scope.Recv(recv, peer, keep.begin * kDouble, keep.size() * kDouble, Channel::kData));
  }
  if (give.size() > 0) HVDD_RETURN_IF_ERROR(scope.WaitSend(send));
  if (keep.size() > 0) HVDD_RETURN_IF_ERROR(scope.WaitRecv(recv));
  return absl::OkStatus();
}

// Sums `sums` over the aligned block of `block` ranks holding this one, by
// recursive doubling: every rank of the block ends with the same bits (each
// step adds two partial sums of the same ranks, and a + b == b + a).
// `exchange` is 2 * kSums doubles registered as `buffer`.
constexpr int kSums = 3;  // a.b, |a|^2, |b|^2
absl::Status SumOverBlock(CollectiveScope& scope, int block, double* exchange,
                          gloo::transport::UnboundBuffer& buffer, double* sums) {
  constexpr size_t kBytes = kSums * sizeof(double);
  for (int distance = 1; distance < block; distance <<= 1) {
    const int peer = scope.rank() ^ distance;
    std::memcpy(exchange, sums, kBytes);
    HVDD_RETURN_IF_ERROR(scope.Send(buffer, peer, 0, kBytes, Channel::kMetadata));
    HVDD_RETURN_IF_ERROR(scope.Recv(buffer, peer, kBytes, kBytes, Channel::kMetadata));
    HVDD_RETURN_IF_ERROR(scope.WaitSend(buffer));
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(buffer));
    for (int i = 0; i < kSums; ++i) sums[i] += exchange[kSums + i];
  }
  return absl::OkStatus();
}

// 1 - a.b / (2 |v|^2), or 0 for a zero vector v. Then a.b is 0 and the
// other vector's coefficient 1: the result is the other vector, exactly.
double Coefficient(double dot, double norm2) { return norm2 > 0 ? 1.0 - dot / (2 * norm2) : 0; }

}  // namespace

bool AdasumSupportsSize(int size) { return size >= 1 && (size & (size - 1)) == 0; }

absl::Status Adasum(GlooContext& context, TensorView inout, double prescale_factor,
                    double postscale_factor) {
  const int size = context.size;
  if (!AdasumSupportsSize(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Adasum runs on a power-of-two number of ranks, not ", size));
  }
  HVDD_ASSIGN_OR_RETURN(std::vector<double> mine, ToDoubles(inout, prescale_factor));
  if (size > 1 && !mine.empty()) {
    CollectiveScope scope(context, "adasum");
    const int rank = scope.rank();
    std::vector<double> theirs(mine.size());
    double exchange[2 * kSums];
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer * mine_buffer,
                          scope.Register(mine.data(), mine.size() * sizeof(double)));
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer * theirs_buffer,
                          scope.Register(theirs.data(), theirs.size() * sizeof(double)));
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer * exchange_buffer,
                          scope.Register(exchange, sizeof(exchange)));
    // Vector halving, distance doubling: `held` shrinks to our 1/size share.
    std::vector<Segment> parents;
    Segment held{0, mine.size()};
    for (int distance = 1; distance < size; distance <<= 1) {
      const bool lower = (rank & distance) == 0;
      const auto [keep, give] = Halves(held, lower);
      HVDD_RETURN_IF_ERROR(Swap(scope, *mine_buffer, *theirs_buffer, rank ^ distance, give, keep));
      // The lower block's vector is a, the upper one's b, on both ranks.
      const double* a = lower ? mine.data() : theirs.data();
      const double* b = lower ? theirs.data() : mine.data();
      double sums[kSums] = {0, 0, 0};
      for (size_t i = keep.begin; i < keep.end; ++i) {
        sums[0] += a[i] * b[i];
        sums[1] += a[i] * a[i];
        sums[2] += b[i] * b[i];
      }
      HVDD_RETURN_IF_ERROR(SumOverBlock(scope, 2 * distance, exchange, *exchange_buffer, sums));
      const double a_coefficient = Coefficient(sums[0], sums[1]);
      const double b_coefficient = Coefficient(sums[0], sums[2]);
      for (size_t i = keep.begin; i < keep.end; ++i) {
        mine[i] = a_coefficient * a[i] + b_coefficient * b[i];
      }
      parents.push_back(held);
      held = keep;
    }
    // Distance halving: each pair swaps the halves it combined.
    for (int distance = size >> 1; distance >= 1; distance >>= 1) {
      const Segment parent = parents.back();
      parents.pop_back();
      const auto [keep, give] = Halves(parent, (rank & distance) == 0);
      HVDD_RETURN_IF_ERROR(Swap(scope, *mine_buffer, *theirs_buffer, rank ^ distance, keep, give));
      std::memcpy(mine.data() + give.begin, theirs.data() + give.begin,
                  give.size() * sizeof(double));
    }
  }
  FromDoubles(mine, postscale_factor, inout);
  return absl::OkStatus();
}

}  // namespace horovodd::internal
