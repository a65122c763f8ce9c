#include "horovodd/tensor.h"

#include <algorithm>
#include <utility>

namespace horovodd {
namespace {

int64_t ShapeNumel(std::vector<int64_t>::const_iterator begin,
                   std::vector<int64_t>::const_iterator end) {
  int64_t count = 1;
  for (auto it = begin; it != end; ++it) count *= *it;
  return count;
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt8:
      return 1;
    case DType::kInt16:
      return 2;
    case DType::kBool:
      return 1;
    case DType::kBFloat16:
      return 2;
  }
  return 0;
}

bool DTypeReducible(DType dtype) { return dtype != DType::kBool && DTypeSize(dtype) != 0; }

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kBool:
      return "bool";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  return "unknown";
}

int64_t TensorView::numel() const { return ShapeNumel(shape.begin(), shape.end()); }

int64_t TensorView::row_numel() const {
  return shape.empty() ? 1 : ShapeNumel(shape.begin() + 1, shape.end());
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  const int64_t count = std::max<int64_t>(0, numel());
  storage_.resize(static_cast<size_t>(count) * DTypeSize(dtype_));
}

int64_t Tensor::numel() const { return ShapeNumel(shape_.begin(), shape_.end()); }

TensorView Tensor::view() { return TensorView{data(), dtype_, shape_, Device{}}; }

}  // namespace horovodd
