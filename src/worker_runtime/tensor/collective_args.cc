#include "worker_runtime/tensor/collective_args.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace horovodd::internal {
namespace {

// "int32 tensor of shape [3, 5]", from what a header carries.
std::string Summary(const ArgumentHeader& header) {
  std::string shape = ShapeString(header.shape);
  if (header.ndim > static_cast<int64_t>(header.shape.size())) {
    shape.insert(shape.size() - 1, ", ...");
  }
  return absl::StrCat(DTypeName(header.dtype), " tensor of shape ", shape);
}

bool Agree(const ArgumentHeader& a, const ArgumentHeader& b, ShapeRule rule) {
  if (a.dtype != b.dtype || a.ndim != b.ndim || a.row_numel != b.row_numel) return false;
  const size_t first = rule == ShapeRule::kSameShape ? 0 : 1;
  for (size_t i = first; i < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

}  // namespace

std::string OpLabel(const char* op, const std::string& name) {
  return name.empty() ? std::string(op) : absl::StrCat(op, " '", name, "'");
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckTensor(const std::string& label, const TensorView& view) {
  if (view.device.type != DeviceType::kCPU) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": tensor is on CUDA device ",
                                                   view.device.index,
                                                   "; gloo collectives take CPU tensors"));
  }
  return CheckTensorLayout(label, view);
}

absl::Status CheckTensorLayout(const std::string& label, const TensorView& view) {
  if (DTypeSize(view.dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": unknown dtype ", static_cast<int>(view.dtype)));
  }
  for (size_t i = 0; i < view.shape.size(); ++i) {
    if (view.shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": shape ", ShapeString(view.shape),
                                                     " has a negative dimension at index ", i));
    }
  }
  if (view.data == nullptr && view.numel() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": tensor data is null but shape ",
                                                   ShapeString(view.shape), " has ", view.numel(),
                                                   " elements"));
  }
  return absl::OkStatus();
}

absl::Status CheckReducible(const std::string& label, DType dtype) {
  if (DTypeReducible(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(label, ": ", DTypeName(dtype), " tensors cannot be reduced (as in Horovod, ",
                   DTypeName(dtype), " is supported by broadcast, allgather and alltoall only)"));
}

absl::Status CheckScaleFactor(const std::string& label, const char* name, double factor) {
  if (std::isfinite(factor)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(label, ": ", name, " must be finite, got ", factor));
}

ArgumentHeader ArgumentHeader::Describe(const TensorView& view, bool valid) {
  ArgumentHeader header;
  header.valid = valid;
  header.dtype = view.dtype;
  header.ndim = static_cast<int64_t>(view.shape.size());
  header.row_numel = view.row_numel();
  const size_t carried = std::min<size_t>(view.shape.size(), kMaxDims);
  header.shape.assign(view.shape.begin(), view.shape.begin() + carried);
  return header;
}

void ArgumentHeader::Encode(int64_t* words) const {
  std::fill(words, words + kWords, 0);
  words[0] = valid ? 1 : 0;
  words[1] = static_cast<int64_t>(dtype);
  words[2] = ndim;
  words[3] = row_numel;
  words[4] = extra;
  std::copy(shape.begin(), shape.end(), words + 5);
}

ArgumentHeader ArgumentHeader::Decode(const int64_t* words) {
  ArgumentHeader header;
  header.valid = words[0] == 1;
  header.dtype = static_cast<DType>(words[1]);
  header.ndim = words[2];
  header.row_numel = words[3];
  header.extra = words[4];
  const int64_t carried = std::clamp<int64_t>(header.ndim, 0, kMaxDims);
  header.shape.assign(words + 5, words + 5 + carried);
  return header;
}

absl::Status CheckAgreement(const std::string& label, const std::vector<ArgumentHeader>& headers,
                            const absl::Status& own_error, ShapeRule rule) {
  if (!own_error.ok()) return own_error;
  for (size_t rank = 0; rank < headers.size(); ++rank) {
    if (!headers[rank].valid) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": rank ", rank, " passed invalid arguments (its own error names them)"));
    }
  }
  for (size_t rank = 1; rank < headers.size(); ++rank) {
    if (Agree(headers[0], headers[rank], rule)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": rank ", rank, " passed a ", Summary(headers[rank]),
                     " but rank 0 passed a ", Summary(headers[0]),
                     rule == ShapeRule::kSameShape
                         ? "; every rank must pass the same dtype and shape"
                         : "; every rank must pass the same dtype and dimensions after the first"));
  }
  return absl::OkStatus();
}

absl::Status NeedsDimension(const std::string& label, const TensorView& view) {
  if (!view.shape.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(label, ": needs a tensor with at least one dimension, got a scalar"));
}

absl::StatusOr<std::vector<int64_t>> ResolveSplits(const std::string& label,
                                                   const TensorView& input,
                                                   const std::vector<int64_t>& splits, int ranks) {
  HVDD_RETURN_IF_ERROR(NeedsDimension(label, input));
  const int64_t rows = input.shape[0];
  if (splits.empty()) {
    if (rows % ranks != 0) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": first dimension ", rows,
                                                     " does not divide evenly among ", ranks,
                                                     " ranks; pass splits"));
    }
    return std::vector<int64_t>(ranks, rows / ranks);
  }
  if (splits.size() != static_cast<size_t>(ranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": got ", splits.size(), " splits for ", ranks, " ranks"));
  }
  int64_t sum = 0;
  for (int i = 0; i < ranks; ++i) {
    if (splits[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": split ", i, " is negative (", splits[i], ")"));
    }
    sum += splits[i];
  }
  if (sum != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": splits sum to ", sum, " but the first dimension is ", rows));
  }
  return splits;
}

AlltoallPlan PlanAlltoall(const std::string& label, const TensorView& input,
                          const std::vector<int64_t>& splits, int ranks) {
  AlltoallPlan plan;
  plan.send_rows.assign(ranks, 0);
  plan.own_error = CheckTensor(label, input);
  if (plan.own_error.ok()) {
    absl::StatusOr<std::vector<int64_t>> resolved = ResolveSplits(label, input, splits, ranks);
    if (resolved.ok()) {
      plan.send_rows = *std::move(resolved);
    } else {
      plan.own_error = resolved.status();
    }
  }
  plan.to_each.assign(ranks, ArgumentHeader::Describe(input, plan.own_error.ok()));
  for (int d = 0; d < ranks; ++d) plan.to_each[d].extra = plan.send_rows[d];
  return plan;
}

absl::Status ReducescatterArgsError(const std::string& label, const TensorView& input,
                                    double prescale_factor, double postscale_factor) {
  HVDD_RETURN_IF_ERROR(CheckTensor(label, input));
  HVDD_RETURN_IF_ERROR(NeedsDimension(label, input));
  HVDD_RETURN_IF_ERROR(CheckReducible(label, input.dtype));
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "prescale_factor", prescale_factor));
  return CheckScaleFactor(label, "postscale_factor", postscale_factor);
}

}  // namespace horovodd::internal
