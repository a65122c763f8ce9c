// The collectives of comm/communicator.h among the ranks of one host, in
// their shared segment (shm_group.h): the same arguments, results and
// errors, with the group in place of the communicator and `deadline`
// bounding every wait. shm_comm/ is the Communicator over them.
//
// Reductions go in rounds of up to slot_bytes per rank. The allreduce: each
// rank owns a 1/n slice of every round; it copies the other slices of its
// tensor into its slot, folds the peers' copies of its own slice into its
// tensor in place, publishes the finished slice in its slot, and copies
// the others' finished slices out of theirs (each slice is folded by one
// rank: every rank ends with the same bits). Reducescatter copies whole
// rounds in and reduces each slice into slot 0. All ranks reduce at once,
// and a round's data is still in the cache. Within a host one wait per
// round does: round k + 1 is copied in while round k is reduced, and the
// wait after both ends the two. The hierarchical allreduce runs its two
// halves apart (shm_own_parts.h).
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
#include "worker_runtime/comm/communicator.h"
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

// Communicator::AllreduceIfAllReady: each rank says whether it is ready in
// the first round; unless all are, every rank returns false having written
// nothing (without a prescale only).
absl::StatusOr<bool> AllreduceIfAllReady(ShmGroup& group, TensorView tensor, bool ready,
                                         const AllreduceOptions& options, absl::Time deadline);

absl::StatusOr<Tensor> Allgather(ShmGroup& group, const TensorView& input, absl::Time deadline);

absl::Status Broadcast(ShmGroup& group, TensorView inout, int root, absl::Time deadline);

absl::StatusOr<Tensor> Alltoall(ShmGroup& group, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits, absl::Time deadline);

absl::StatusOr<Tensor> Reducescatter(ShmGroup& group, const TensorView& input,
                                     const ReducescatterOptions& options, absl::Time deadline);

absl::Status Barrier(ShmGroup& group, absl::Time deadline);

}  // namespace horovodd::internal::shm
