#include "worker_runtime/nccl/nccl_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace horovodd::internal {

absl::Status NcclStatus(ncclResult_t result, absl::string_view what, absl::string_view detail) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": NCCL error ", static_cast<int>(result), ", ",
                                     ncclGetErrorString(result));
  if (!detail.empty()) absl::StrAppend(&message, ": ", detail);
  switch (result) {
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace horovodd::internal
