// The TCP ring's collectives on a Gloo context made by ConnectGlooContext
// (gloo_context.h): comm/communicator.h's ops with the context in place of
// the communicator, and the same contracts (arguments, results, codes). A
// failure other than INVALID_ARGUMENT (or FAILED_PRECONDITION) marks the
// context failed. GlooCommunicator (gloo_communicator.h) is the
// Communicator over them; the algorithms are in gloo_allreduce.cc,
// gloo_ops.cc and gloo_adasum.h.
#pragma once

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

}  // namespace horovodd::internal
