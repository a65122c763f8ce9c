// NCCL results as absl::Status. NCCL builds only.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace horovodd::internal {

// OK for ncclSuccess; otherwise "<what>: <NCCL's description>[: <detail>]"
// with UNAVAILABLE for a lost peer or a failed system call (ncclRemoteError,
// ncclSystemError), INVALID_ARGUMENT for a bad call (ncclInvalidArgument,
// ncclInvalidUsage), INTERNAL for everything else (a CUDA error inside NCCL,
// an NCCL bug, or ncclInProgress where a finished call was expected).
// `detail` is usually ncclGetLastError(), which says which peer or argument.
absl::Status NcclStatus(ncclResult_t result, absl::string_view what, absl::string_view detail = "");

}  // namespace horovodd::internal
