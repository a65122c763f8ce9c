#include "worker_runtime/gpu/gpu_operations.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace horovodd::internal {
namespace {

constexpr char kVariable[] = "HOROVOD_GPU_OPERATIONS";

}  // namespace

const char* GpuOperationsName(GpuOperations operations) {
  return operations == GpuOperations::kNccl ? "nccl" : "gloo";
}

bool BuiltWithCuda() { return HVDD_HAVE_CUDA != 0; }
bool BuiltWithNccl() { return HVDD_HAVE_NCCL != 0; }

absl::StatusOr<GpuOperations> ParseGpuOperations(absl::string_view value, bool nccl_available) {
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (lowered.empty()) return nccl_available ? GpuOperations::kNccl : GpuOperations::kGloo;
  if (lowered == "gloo") return GpuOperations::kGloo;
  if (lowered == "nccl") {
    if (nccl_available) return GpuOperations::kNccl;
    return absl::InvalidArgumentError(absl::StrCat(
        kVariable, "=", value,
        " but this build of horovodd has no NCCL (it was not found when horovodd was built); "
        "unset it or use gloo"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kVariable, " must be nccl or gloo, got '", value, "'"));
}

absl::StatusOr<GpuOperations> GpuOperationsFromEnvironment() {
  const char* value = std::getenv(kVariable);
  return ParseGpuOperations(value == nullptr ? "" : value, BuiltWithNccl());
}

}  // namespace horovodd::internal
