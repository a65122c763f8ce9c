// Argument checks shared by the collectives: what one rank can check alone,
// and the fixed-size header ranks exchange so that all of them agree on
// dtype and shape (and all fail together when one of them is wrong).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"

namespace horovodd::internal {

// "allreduce", or "allreduce 'grads'": a collective as errors name it.
std::string OpLabel(const char* op, const std::string& name);

// "[2, 3]"; a scalar is "[]".
std::string ShapeString(const std::vector<int64_t>& shape);

// Known dtype, no negative dimension, data present when there are elements,
// whatever the device. Errors start with `label`.
absl::Status CheckTensorLayout(const std::string& label, const TensorView& view);

// CheckTensorLayout on a CPU tensor.
absl::Status CheckTensor(const std::string& label, const TensorView& view);

// INVALID_ARGUMENT for a dtype no reduction takes (bool, as in Horovod,
// which allows it only for broadcast, allgather and alltoall).
absl::Status CheckReducible(const std::string& label, DType dtype);

// Scale factors must be finite.
absl::Status CheckScaleFactor(const std::string& label, const char* name, double factor);

// What a rank tells its peers about its argument before an op that sizes
// its output from theirs.
struct ArgumentHeader {
  // Dimensions carried in full; beyond them ranks compare row_numel only.
  static constexpr int kMaxDims = 8;
  static constexpr size_t kWords = 5 + kMaxDims;

  bool valid = false;  // false: this rank rejected its own arguments
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // at most kMaxDims entries
  int64_t ndim = 0;
  int64_t row_numel = 0;
  int64_t extra = 0;  // per-destination payload (alltoall: rows sent there)

  static ArgumentHeader Describe(const TensorView& view, bool valid);
  void Encode(int64_t* words) const;
  static ArgumentHeader Decode(const int64_t* words);
};

enum class ShapeRule {
  kSameTrailingDims,  // concatenated along the first dimension
  kSameShape,         // reduced element-wise
};

// Checks the headers every rank sent (headers[r] from rank r, ours
// included); `own_error` is why this rank rejected its arguments, if it did.
// Every rank fails when any does: on a rank that rejected its arguments, or
// on the lowest rank disagreeing with rank 0.
absl::Status CheckAgreement(const std::string& label, const std::vector<ArgumentHeader>& headers,
                            const absl::Status& own_error, ShapeRule rule);

// INVALID_ARGUMENT for a scalar, where an op splits the first dimension.
absl::Status NeedsDimension(const std::string& label, const TensorView& view);

// Rows this rank sends to each of `ranks` (empty splits: an equal split,
// which the first dimension must allow).
absl::StatusOr<std::vector<int64_t>> ResolveSplits(const std::string& label,
                                                   const TensorView& input,
                                                   const std::vector<int64_t>& splits, int ranks);

// An alltoall's side before the header exchange, the same over TCP and
// shared memory: the rows this rank sends each of `ranks`, the header each
// of them gets from it (extra = those rows; invalid when this rank rejected
// its arguments) and why it rejected them (then it sends no rows).
struct AlltoallPlan {
  std::vector<int64_t> send_rows;
  std::vector<ArgumentHeader> to_each;
  absl::Status own_error;
};
AlltoallPlan PlanAlltoall(const std::string& label, const TensorView& input,
                          const std::vector<int64_t>& splits, int ranks);

// Why this rank rejects its reducescatter's arguments (OK when it does not).
absl::Status ReducescatterArgsError(const std::string& label, const TensorView& input,
                                    double prescale_factor, double postscale_factor);

}  // namespace horovodd::internal
