// Which backend runs collectives on GPU tensors, as Horovod's
// HOROVOD_GPU_OPERATIONS chooses it: "nccl" (on the GPU, when this build has
// NCCL) or "gloo" (staged through host memory and the Gloo ring).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace horovodd::internal {

enum class GpuOperations { kNccl, kGloo };

// "nccl" / "gloo".
const char* GpuOperationsName(GpuOperations operations);

// What this build was compiled with (HVDD_HAVE_CUDA / HVDD_HAVE_NCCL).
bool BuiltWithCuda();
bool BuiltWithNccl();

// The value of HOROVOD_GPU_OPERATIONS, in any case; empty means the default:
// nccl when `nccl_available`, else gloo. INVALID_ARGUMENT naming the variable
// for any other value, and for "nccl" when NCCL is not available.
absl::StatusOr<GpuOperations> ParseGpuOperations(absl::string_view value, bool nccl_available);

// ParseGpuOperations(getenv("HOROVOD_GPU_OPERATIONS"), BuiltWithNccl()).
absl::StatusOr<GpuOperations> GpuOperationsFromEnvironment();

}  // namespace horovodd::internal
