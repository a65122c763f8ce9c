// The NCCL backend's only kernel: pre- and post-scaling of GPU tensors, with
// the CPU path's rules (reduce_kernels.h ScaleInPlace, Horovod's): the
// factor cast to the element's type and multiplied there, float16 and
// bfloat16 through float32, integers in double, truncated toward zero and
// saturating at the type's limits. Compiled by nvcc (nccl_scale_kernel.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "horovodd/tensor.h"

namespace horovodd::internal {

// Enqueues output[i] = input[i] * factor for `count` elements on `stream`
// (input == output scales in place). Returns the launch's error.
cudaError_t LaunchScale(DType dtype, const void* input, void* output, size_t count, double factor,
                        cudaStream_t stream);

}  // namespace horovodd::internal
