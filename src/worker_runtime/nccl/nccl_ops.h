// The collectives on CUDA tensors, run on a generation's NcclComm: the ops of
// comm/communicator.h with its contracts (argument rules, results, codes),
// the NcclComm in place of the communicator; nccl_communicator.h is the
// Communicator over them. What NCCL adds:
//   - ABORTED comes from should_abort() turning true (the generation was
//     superseded), a tensor on another device than the communicator's is
//     INVALID_ARGUMENT;
//   - after any failure but INVALID_ARGUMENT found before the op started,
//     the NcclComm is aborted: later ops return the same failure at once;
//   - the header exchange of the ops that size their output from the peers
//     is grouped ncclSend/ncclRecv, and their results are new DeviceTensors
//     on the communicator's device;
//   - average is ncclAvg (integers truncate), before the postscale.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/device_tensor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/nccl/nccl_comm.h"

namespace horovodd::internal {

absl::Status Allreduce(NcclComm& comm, TensorView inout, const AllreduceOptions& options);

// Ranks may contribute different first dimensions: equal ones go through
// ncclAllGather, unequal ones through grouped send/receive.
absl::StatusOr<DeviceTensor> Allgather(NcclComm& comm, const TensorView& input);

absl::Status Broadcast(NcclComm& comm, TensorView inout, int root);

absl::StatusOr<DeviceTensor> Alltoall(NcclComm& comm, const TensorView& input,
                                      const std::vector<int64_t>& splits,
                                      std::vector<int64_t>* received_splits);

// Rank r keeps its share of the first dimension, the first (rows % size)
// ranks one row more: ncclReduceScatter when the shares are equal, one
// ncclReduce per rank otherwise.
absl::StatusOr<DeviceTensor> Reducescatter(NcclComm& comm, const TensorView& input,
                                           const ReducescatterOptions& options);

}  // namespace horovodd::internal
