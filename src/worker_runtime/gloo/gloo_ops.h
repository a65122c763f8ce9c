// The collectives the worker runtime runs on a Gloo context made by
// ConnectGlooContext (gloo_context.h).
//
// Every rank calls the same ops in the same order, from one thread at a
// time per context. Results:
//   OK                 done;
//   INVALID_ARGUMENT   bad input, named in the message (non-CPU tensor,
//                      negative dimension, root out of range, splits that do
//                      not sum to the first dimension, ranks that disagree on
//                      dtype or shape where the op compares them);
//   UNAVAILABLE        a peer was lost ("allreduce 'name' failed: <what>");
//   DEADLINE_EXCEEDED  the op ran past the context's timeout;
//   ABORTED            the context was aborted (AbortGlooContext).
// After UNAVAILABLE, DEADLINE_EXCEEDED or ABORTED the context is dead: every
// later op returns the same failure at once, and its peers' ops fail too.
// INVALID_ARGUMENT leaves the context usable. In-place ops leave their
// tensor unspecified when they fail.
//
// Ops that learn their output size from the peers (allgather, alltoall,
// reducescatter) exchange dtype and shape first and fail on every rank when
// any rank's arguments are bad. Allreduce and broadcast send no such header
// (they are the hot path): every rank must pass the same dtype and element
// count, and a rank that rejects its own arguments leaves its peers waiting
// until the timeout.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

// In place: every rank ends with op over all ranks' (prescaled) inout, then
// postscaled. Average divides the sum by the size (integers truncate) before
// the postscale.
absl::Status Allreduce(GlooContext& context, TensorView inout,
                       const AllreduceOptions& options);

// Allreduce of several tensors of one dtype as of one tensor laid end to
// end, read and written in place with no staging copy. Only where every rank
// of the context shares this host (gloo_local.h's AllLocalGroup: shared
// memory copies straight from and into the parts); elsewhere
// FAILED_PRECONDITION, and the caller packs the parts into one tensor for
// Allreduce.
absl::Status AllreduceParts(GlooContext& context, const std::vector<TensorView>& parts,
                            const AllreduceOptions& options);

// An allreduce that confirms itself, for a caller that runs it before it
// knows whether every rank wants it (the engine's speculation,
// engine_speculation.h): each rank says whether it is `ready` alongside its
// first exchange. When every rank is, `tensor` ends as Allreduce would leave
// it and every rank gets true. When any is not, every rank gets false and
// nothing was written (`tensor` was only read; a rank that is not ready
// passes any tensor of the same dtype and count). Only where
// AllreduceConfirmsItself (the pairwise algorithm, no prescale); elsewhere
// FAILED_PRECONDITION.
bool AllreduceConfirmsItself(const GlooContext& context, const TensorView& tensor,
                             const AllreduceOptions& options);
absl::StatusOr<bool> AllreduceIfAllReady(GlooContext& context, TensorView tensor, bool ready,
                                         const AllreduceOptions& options);

// Ranks may contribute different first dimensions; the other dimensions and
// the dtype must match. Result: the inputs concatenated in rank order.
absl::StatusOr<Tensor> Allgather(GlooContext& context, const TensorView& input);

// In place: every rank ends with root's inout.
absl::Status Broadcast(GlooContext& context, TensorView inout, int root);

// splits[i] first-dimension rows go to rank i (empty splits: an equal split,
// the first dimension must divide by the size). The result holds the rows
// received, from rank 0 up; received_splits (optional) says how many came
// from each rank.
absl::StatusOr<Tensor> Alltoall(GlooContext& context, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits);

// Reduces inputs of equal shape across ranks, then rank r keeps rows
// [offset_r, offset_r + count_r) of the first dimension: counts as even as
// possible, the first (rows % size) ranks get one more (Horovod's rule).
absl::StatusOr<Tensor> Reducescatter(GlooContext& context, const TensorView& input,
                                     ReduceOp op, double prescale_factor = 1.0,
                                     double postscale_factor = 1.0);

// Returns once every rank has entered it.
absl::Status Barrier(GlooContext& context);

}  // namespace horovodd::internal
