// The collectives on CUDA tensors, run on a generation's NcclComm. They keep
// gloo_ops.h's contracts (same argument rules, same results, same codes), with
// the NCCL communicator in place of the Gloo context:
//   OK                 done;
//   INVALID_ARGUMENT   bad input, named in the message (a CPU tensor, a tensor
//                      on another device than the communicator's, a negative
//                      dimension, root out of range, bad splits, ranks that
//                      disagree on dtype or shape where the op compares them);
//   UNAVAILABLE        a peer was lost or the network failed;
//   DEADLINE_EXCEEDED  the op ran past the communicator's timeout;
//   ABORTED            should_abort() turned true (the generation was
//                      superseded).
// After any failure but INVALID_ARGUMENT found before the op started, the
// communicator is aborted: later ops return the same failure at once.
//
// Ops that size their output from the peers (allgather, alltoall,
// reducescatter) first exchange a header per rank (dtype, shape, rows sent)
// with grouped ncclSend/ncclRecv, so they fail on every rank together when any
// rank's arguments are bad; their results are new DeviceTensors on the
// communicator's device. Allreduce and broadcast send no header (the hot
// path): every rank must pass the same dtype and element count.
// Average divides the sum by the size (ncclAvg; integers truncate), before the
// postscale, as on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/device_tensor.h"
#include "horovodd/tensor.h"
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
absl::StatusOr<DeviceTensor> Reducescatter(NcclComm& comm, const TensorView& input, ReduceOp op,
                                           double prescale_factor = 1.0,
                                           double postscale_factor = 1.0);

}  // namespace horovodd::internal
