// What the NCCL collectives share: dtype and reduce-op mapping, argument
// checks, row bookkeeping and the header exchange. NCCL builds only.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gpu/gpu_args.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {

ncclDataType_t NcclDataType(DType dtype);
// INVALID_ARGUMENT, starting with `label`, for a dtype NCCL cannot reduce.
absl::Status CheckNcclReducible(const std::string& label, DType dtype);
// Average is ncclAvg: a sum divided by the size (integers truncate).
ncclRedOp_t NcclReduceOp(ReduceOp op);

// `rows` split over `ranks` as evenly as possible, the first rows % ranks
// ranks taking one more (Horovod's reducescatter rule).
std::vector<int64_t> EvenRows(int64_t rows, int ranks);

// Where each block of rows starts, in rows (a prefix sum).
std::vector<int64_t> RowOffsets(const std::vector<int64_t>& rows);

// True when every entry equals the first.
bool AllEqual(const std::vector<int64_t>& values);

class NcclComm;

// Sends to_each[p] to every rank p and returns the header each rank sent us
// (ours at [rank]), through grouped ncclSend/ncclRecv (nccl_ops_exchange.cc).
absl::StatusOr<std::vector<ArgumentHeader>> ExchangeHeaders(
    NcclComm& comm, const std::string& label, const std::vector<ArgumentHeader>& to_each);

}  // namespace horovodd::internal
