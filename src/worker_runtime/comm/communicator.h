// The collectives of one generation's ring (or one process set's), whatever
// carries them. Implementations: the TCP ring (gloo/gloo_communicator.h),
// one host's shared memory (shm_comm/), shared memory within hosts and TCP
// across them (hierarchical/), NCCL (nccl/) and GPU tensors staged through
// host memory (gpu/gpu_staging.h). comm_factory/ picks the CPU one once per
// generation and process set; the engine sees only this interface.
//
// Every rank calls the same ops in the same order, from one thread at a time
// (the collective thread); Abort() may come from any thread. Results:
//   OK                 done;
//   INVALID_ARGUMENT   bad input, named in the message (a tensor on the wrong
//                      device, a negative dimension, root out of range,
//                      splits that do not sum to the first dimension, ranks
//                      that disagree on dtype or shape where the op compares
//                      them);
//   FAILED_PRECONDITION  an op this communicator does not run
//                      (AllreduceParts, AllreduceIfAllReady: see each), or,
//                      for GPU tensors, a machine without a GPU;
//   UNAVAILABLE        a peer was lost ("allreduce 'name' failed: <what>");
//   DEADLINE_EXCEEDED  the op ran past the communicator's timeout;
//   ABORTED            the communicator was aborted (Abort()).
// After UNAVAILABLE, DEADLINE_EXCEEDED or ABORTED the communicator is dead:
// every later op fails at once, and so do its peers' ops. INVALID_ARGUMENT
// leaves it usable, and so does an op it does not run. In-place ops leave
// their tensor unspecified when they fail.
//
// Ops that learn their output size from the peers (allgather, alltoall,
// reducescatter) exchange dtype and shape first and fail on every rank when
// any rank's arguments are bad; their results are host tensors, whatever
// the input's device. Allreduce and broadcast send no such header (they are
// the hot path): every rank must pass the same dtype and element count, and
// a rank that rejects its own arguments leaves its peers waiting until the
// timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"

namespace horovodd::internal {

class Negotiator;  // negotiator.h

struct ReducescatterOptions {
  ReduceOp op = ReduceOp::kAverage;
  // Multiplied into the input before the reduction / the result after it.
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
};

// Whether an allreduce can confirm itself here (AllreduceIfAllReady).
enum class SelfConfirmation {
  kNone,    // it cannot
  kInBand,  // it can: the ready words ride beside its first exchange
  kFree,    // it can, at no cost over a plain allreduce at any size
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: every rank ends with op over all ranks' (prescaled) inout,
  // then postscaled; Average is the sum postscaled by postscale / size.
  // Scaling is Horovod's (tensor/reduce_kernels.h ScaleInPlace).
  virtual absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) = 0;

  // Allreduce of parts of one dtype as of one tensor laid end to end, read
  // and written where they lie (no fusion buffer). Only where
  // ReducesPartsInPlace(); elsewhere FAILED_PRECONDITION.
  virtual bool ReducesPartsInPlace() const { return false; }
  virtual absl::Status AllreduceParts(const std::vector<TensorView>& parts,
                                      const AllreduceOptions& options);

  // An allreduce that confirms itself, for a caller that runs it before it
  // knows whether every rank wants it (the engine's speculation): each rank
  // says whether it is `ready`. When every rank is, `tensor` ends as
  // Allreduce leaves it and every rank gets true; when any is not, every
  // rank gets false and nothing was written (a rank that is not ready passes
  // any tensor of the same dtype and count). Only where ConfirmsItself() is
  // not kNone for the tensor and options; elsewhere FAILED_PRECONDITION.
  virtual SelfConfirmation ConfirmsItself(const TensorView& tensor,
                                          const AllreduceOptions& options) const;
  virtual absl::StatusOr<bool> AllreduceIfAllReady(TensorView tensor, bool ready,
                                                   const AllreduceOptions& options);

  // Ranks may contribute different first dimensions; the other dimensions
  // and the dtype must match. Result: the inputs concatenated in rank order.
  virtual absl::StatusOr<Tensor> Allgather(const TensorView& input) = 0;

  // In place: every rank ends with root's inout.
  virtual absl::Status Broadcast(TensorView inout, int root) = 0;

  // splits[i] first-dimension rows go to rank i (empty splits: an equal
  // split, the first dimension must divide by the size). The result holds
  // the rows received, from rank 0 up; received_splits (optional) says how
  // many came from each rank.
  virtual absl::StatusOr<Tensor> Alltoall(const TensorView& input,
                                          const std::vector<int64_t>& splits,
                                          std::vector<int64_t>* received_splits) = 0;

  // Reduces inputs of equal shape, then rank r keeps rows [offset_r,
  // offset_r + count_r) of the first dimension: counts as even as possible,
  // the first (rows % size) ranks one more (Horovod's rule).
  virtual absl::StatusOr<Tensor> Reducescatter(const TensorView& input,
                                               const ReducescatterOptions& options) = 0;

  // In place: the Adasum of every rank's inout (gloo/gloo_adasum.h), each
  // prescaled, the result postscaled. float16, bfloat16, float32 and
  // float64 on a power-of-two number of ranks; else INVALID_ARGUMENT.
  virtual absl::Status Adasum(TensorView inout, double prescale_factor,
                              double postscale_factor) = 0;

  // Returns once every rank has entered it.
  virtual absl::Status Barrier() = 0;

  // The transport of the engine's negotiation rounds among these ranks;
  // null where the engine does not negotiate (the GPU communicators).
  virtual Negotiator* negotiator() { return nullptr; }

  // Makes ops blocked in other threads return ABORTED promptly, and every
  // later one at once (the daemon superseded the generation). Any thread,
  // idempotent.
  virtual void Abort() = 0;
  // OK while usable; otherwise why not.
  virtual absl::Status health() const = 0;
};

// Runs `op` on the current generation's communicator of one process set:
// the runtime's RunCollective, which maps a superseded generation to ABORTED.
using CommunicatorOp = absl::FunctionRef<absl::Status(Communicator&)>;
using CommunicatorRunner = std::function<absl::Status(CommunicatorOp op)>;

}  // namespace horovodd::internal
