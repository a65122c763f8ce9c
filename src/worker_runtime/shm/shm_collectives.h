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
// (gloo_hierarchical.cc) uses the two halves apart: ReduceOwnPart leaves each
// rank its own contiguous part reduced over the host, the part crosses hosts
// over TCP in one exchange, and ShareOwnParts copies every rank's part into
// every other's tensor.
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

// Local rank r's part of a tensor of `count` elements in ReduceOwnPart and
// ShareOwnParts: contiguous, Horovod's split (the first count % parts are
// one element longer).
struct PartRange {
  int64_t offset = 0;
  int64_t count = 0;
};
PartRange OwnPart(int64_t count, int parts, int r);

// The first half of an allreduce, in place: this rank's own part of `inout`
// (OwnPart) ends up holding the reduction (prescaled, not finished: kAverage
// is still a sum) of every local rank's copy of it, folded in place: this
// rank's copy first, then the others' in local rank order; the rest of
// `inout` is left as it was. In rounds that each carry, in a rank's slot,
// one chunk of each of the other ranks' parts: a rank's own part never
// goes through the segment.
absl::Status ReduceOwnPart(ShmGroup& group, TensorView inout, const AllreduceOptions& options,
                           absl::Time deadline);

// The second half: every rank's own part of `inout` is copied into the same
// place of every other local rank's `inout`.
absl::Status ShareOwnParts(ShmGroup& group, TensorView inout, absl::Time deadline);

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
