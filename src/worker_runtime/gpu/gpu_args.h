// Checks on GPU tensors that both GPU communicators (NCCL, and staging
// through host memory) make before touching them.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "horovodd/tensor.h"

namespace horovodd::internal {

// A CUDA tensor on `device`, with a known dtype, no negative dimension, and
// data when it has elements. INVALID_ARGUMENT starting with `label`.
absl::Status CheckGpuTensor(const std::string& label, const TensorView& view, int device);

}  // namespace horovodd::internal
