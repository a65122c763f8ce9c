// Typed, non-owning views of tensors as the runtime's collectives see them,
// plus a small owning Tensor for results whose size only the collective knows
// (allgather, alltoall, reducescatter). The Python binding wraps torch/numpy
// memory in a TensorView without copying; the GPU backend reads `device`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace horovodd {

// New dtypes go at the end: descriptors carry the value between ranks.
// kBool is one byte per element (0 or 1); kBFloat16 holds raw bfloat16 bit
// patterns (the upper half of a float32), reduced through float32.
enum class DType : uint8_t {
  kUInt8,
  kInt32,
  kInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kInt8,
  kInt16,
  kBool,
  kBFloat16,
};

// Whether allreduce, reducescatter and the like may combine this dtype.
// Horovod takes bool only for broadcast, allgather and alltoall.
bool DTypeReducible(DType dtype);

// Bytes per element, and a lower-case name ("float32") for messages.
size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
};

// A view of memory someone else owns. Row-major and contiguous.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty = scalar (one element)
  Device device;

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  // Elements in one slice along the first dimension (numel of shape[1:]).
  int64_t row_numel() const;
};

// An owning, contiguous CPU tensor.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  size_t nbytes() const { return storage_.size(); }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(storage_.data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(storage_.data());
  }
  TensorView view();

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  std::vector<unsigned char> storage_;
};

// Maps C++ element types to DType.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};

// A 1-D view of a vector (shape {size}).
template <typename T>
TensorView ViewOf(std::vector<T>& values) {
  return TensorView{
      values.data(), DTypeOf<T>::value, {static_cast<int64_t>(values.size())}, Device{}};
}

enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct };
const char* ReduceOpName(ReduceOp op);

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;  // Horovod's default
  // Multiplied into the input before the reduction / the result after it.
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  // Identifies the tensor in errors and (later) in the fusion engine.
  std::string name;
  // The process set (process_sets.h) whose ranks reduce; 0 is every rank.
  // kAverage divides by its size, also while some of its ranks have joined
  // (horovodd::Join) and contribute zeros, as in Horovod.
  int process_set_id = 0;
};

}  // namespace horovodd
