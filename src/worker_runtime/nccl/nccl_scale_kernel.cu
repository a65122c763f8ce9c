#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "worker_runtime/nccl/nccl_scale.h"

namespace horovodd::internal {
namespace {

// The type's limits, from the host (std::numeric_limits is host-only here).
template <typename T>
struct Limits {
  T lowest;
  T highest;
};

template <typename T>
__device__ T ScaleOne(T value, double factor, Limits<T> limits) {
  if constexpr (std::is_integral_v<T>) {
    const double scaled = trunc(static_cast<double>(value) * factor);
    if (isnan(scaled)) return 0;
    if (scaled <= static_cast<double>(limits.lowest)) return limits.lowest;
    // For int64, double(max) rounds up to 2^63, so >= catches every value
    // that does not fit.
    if (scaled >= static_cast<double>(limits.highest)) return limits.highest;
    return static_cast<T>(scaled);
  } else {
    return static_cast<T>(factor) * value;  // the factor in the element's type
  }
}

template <>
__device__ __half ScaleOne<__half>(__half value, double factor, Limits<__half>) {
  return __float2half_rn(static_cast<float>(factor) * __half2float(value));
}

template <>
__device__ __nv_bfloat16 ScaleOne<__nv_bfloat16>(__nv_bfloat16 value, double factor,
                                                 Limits<__nv_bfloat16>) {
  return __float2bfloat16_rn(static_cast<float>(factor) * __bfloat162float(value));
}

template <typename T>
__global__ void ScaleKernel(const T* input, T* output, size_t count, double factor,
                            Limits<T> limits) {
  const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    output[i] = ScaleOne(input[i], factor, limits);
  }
}

template <typename T>
cudaError_t Launch(const void* input, void* output, size_t count, double factor,
                   cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  constexpr size_t kMaxBlocks = 4096;  // the loop strides over the rest
  const size_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  Limits<T> limits{};
  if constexpr (std::is_integral_v<T>) {
    limits = Limits<T>{std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
  }
  ScaleKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(input),
                                                  static_cast<T*>(output), count, factor, limits);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchScale(DType dtype, const void* input, void* output, size_t count, double factor,
                        cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (dtype) {
    case DType::kUInt8:
      return Launch<uint8_t>(input, output, count, factor, stream);
    case DType::kInt32:
      return Launch<int32_t>(input, output, count, factor, stream);
    case DType::kInt64:
      return Launch<int64_t>(input, output, count, factor, stream);
    case DType::kFloat16:
      return Launch<__half>(input, output, count, factor, stream);
    case DType::kFloat32:
      return Launch<float>(input, output, count, factor, stream);
    case DType::kFloat64:
      return Launch<double>(input, output, count, factor, stream);
    case DType::kInt8:
      return Launch<int8_t>(input, output, count, factor, stream);
    case DType::kInt16:
      return Launch<int16_t>(input, output, count, factor, stream);
    case DType::kBFloat16:
      return Launch<__nv_bfloat16>(input, output, count, factor, stream);
    case DType::kBool:
      return cudaErrorInvalidValue;  // never scaled: not reducible
  }
  return cudaErrorInvalidValue;
}

}  // namespace horovodd::internal
