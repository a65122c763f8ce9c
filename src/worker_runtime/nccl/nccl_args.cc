#include "worker_runtime/nccl/nccl_args.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {

ncclDataType_t NcclDataType(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return ncclUint8;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt8:
      return ncclInt8;
    // NCCL has no int16 and no bool: both move as elements of their size
    // (broadcast, allgather, alltoall); CheckNcclReducible refuses reducing them.
    case DType::kInt16:
      return ncclFloat16;
    case DType::kBool:
      return ncclUint8;
    case DType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclFloat32;  // unreachable: CheckGpuTensor rejects unknown dtypes
}

absl::Status CheckNcclReducible(const std::string& label, DType dtype) {
  HVDD_RETURN_IF_ERROR(CheckReducible(label, dtype));
  if (dtype == DType::kInt16) {
    return absl::InvalidArgumentError(absl::StrCat(
        label,
        ": NCCL cannot reduce int16 tensors (as in Horovod); use HOROVOD_GPU_OPERATIONS="
        "gloo or another dtype"));
  }
  return absl::OkStatus();
}

ncclRedOp_t NcclReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
  }
  return ncclSum;
}

std::vector<int64_t> EvenRows(int64_t rows, int ranks) {
  std::vector<int64_t> counts(ranks, rows / ranks);
  for (int64_t r = 0; r < rows % ranks; ++r) ++counts[r];
  return counts;
}

std::vector<int64_t> RowOffsets(const std::vector<int64_t>& rows) {
  std::vector<int64_t> offsets(rows.size(), 0);
  for (size_t i = 1; i < rows.size(); ++i) offsets[i] = offsets[i - 1] + rows[i - 1];
  return offsets;
}

bool AllEqual(const std::vector<int64_t>& values) {
  for (int64_t value : values) {
    if (value != values.front()) return false;
  }
  return true;
}

}  // namespace horovodd::internal
