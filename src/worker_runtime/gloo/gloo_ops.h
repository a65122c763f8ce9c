// The TCP ring's collectives on a Gloo context made by ConnectGlooContext
// (gloo_context.h): comm/communicator.h's ops with the context in place of
// the communicator, and the same contracts (arguments, results, codes). A
// failure other than INVALID_ARGUMENT (or FAILED_PRECONDITION) marks the
// context failed. GlooCommunicator (gloo_communicator.h) is the
// Communicator over them; the algorithms are in gloo_allreduce.cc,
// gloo_ops.cc and gloo_adasum.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

absl::Status Allreduce(GlooContext& context, TensorView inout, const AllreduceOptions& options);

// Over TCP only the pairwise algorithm (gloo_allreduce.cc) without a
// prescale confirms itself.
bool AllreduceConfirmsItself(const GlooContext& context, const TensorView& tensor,
                             const AllreduceOptions& options);
absl::StatusOr<bool> AllreduceIfAllReady(GlooContext& context, TensorView tensor, bool ready,
                                         const AllreduceOptions& options);

absl::StatusOr<Tensor> Allgather(GlooContext& context, const TensorView& input);

absl::Status Broadcast(GlooContext& context, TensorView inout, int root);

absl::StatusOr<Tensor> Alltoall(GlooContext& context, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits);

absl::StatusOr<Tensor> Reducescatter(GlooContext& context, const TensorView& input,
                                     const ReducescatterOptions& options);

absl::Status Barrier(GlooContext& context);

// Every rank's `bytes` bytes at `mine`, rank r's at [r * bytes], every rank
// giving the same `bytes`: for the small records a ring's set-up exchanges
// (comm_factory/host_layout.h), in ceil(log2 n) rounds (Bruck's allgather):
// round k sends what this rank holds so far to rank - 2^k and receives as
// much from rank + 2^k. A round costs waking every process once; the ring's
// allgather takes n - 1 of them, which on a host with more ranks than CPUs
// made a 256-rank reset quadratic. Connects the 2 log2(n) peers it talks to.
absl::StatusOr<std::vector<uint8_t>> AllgatherRecords(GlooContext& context, const void* mine,
                                                      size_t bytes);

}  // namespace horovodd::internal
