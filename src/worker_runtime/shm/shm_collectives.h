// The collectives of gloo_ops.h, among the ranks of one host in their
// shared segment (shm_group.h). Same arguments, results and errors, with
// the group in place of the ring; `deadline` bounds every wait.
//
// Reductions go in rounds of up to slot_bytes per rank: every rank copies
// its part of the tensor into its slot, then each reduces its 1/n slice of
// the round across all slots (in rank order, into slot 0: every rank ends
// with the same bits), then every rank copies the whole reduced round out.
// All ranks reduce at once, and a round's data is still in the cache. Within
// a host one wait per round does: round k + 1 is copied in while round k is
// reduced, and the wait after both ends the two. The hierarchical allreduce
// runs its two halves apart (shm_own_parts.h).
//
// Any failure other than INVALID_ARGUMENT kills the group on every local
// rank (ShmGroup::Fail), as a failed collective kills a Gloo context.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "horovodd/tensor.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal::shm {

// In place.
absl::Status Allreduce(ShmGroup& group, TensorView inout, const AllreduceOptions& options,
                       absl::Time deadline);

// Allreduce of `parts` (one dtype) as of one tensor laid end to end, read
// from and written back to the parts directly: the engine's fused batches,
// without copies into and out of a fusion buffer.
absl::Status AllreduceParts(ShmGroup& group, const std::vector<TensorView>& parts,
                            const AllreduceOptions& options, absl::Time deadline);

// gloo_ops.h's AllreduceIfAllReady: each rank says whether it is ready in
// the first round; unless all are, every rank returns false having written
// nothing (without a prescale only).
absl::StatusOr<bool> AllreduceIfAllReady(ShmGroup& group, TensorView tensor, bool ready,
                                         const AllreduceOptions& options, absl::Time deadline);

absl::StatusOr<Tensor> Allgather(ShmGroup& group, const TensorView& input, absl::Time deadline);

absl::Status Broadcast(ShmGroup& group, TensorView inout, int root, absl::Time deadline);

absl::StatusOr<Tensor> Alltoall(ShmGroup& group, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits, absl::Time deadline);

absl::StatusOr<Tensor> Reducescatter(ShmGroup& group, const TensorView& input, ReduceOp op,
                                     double prescale_factor, double postscale_factor,
                                     absl::Time deadline);

absl::Status Barrier(ShmGroup& group, absl::Time deadline);

}  // namespace horovodd::internal::shm
