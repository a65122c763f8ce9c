// Overlapping a round's negotiation with the collective it is about to agree
// on, or doing without it.
//
// A loop that calls one synchronous allreduce per step (a loss, a metric, a
// flat gradient buffer) makes every round the same: one request, same name,
// same descriptor. Negotiating it and then reducing it costs two exchanges
// that each wait for every rank: the negotiation waits for the slowest rank
// to finish the previous collective, and on a busy machine (more processes
// than cores) it costs about as much as a small allreduce and a tenth of a
// 4 MiB one. So after two such rounds in a row every rank predicts that the
// next round is the same again and, in it, reduces the predicted tensor one
// of two ways:
//   on a copy   small tensors (up to 1 MiB, 256 KiB at 2 ranks): the whole
//               allreduce on a copy in the fusion buffer while the round's
//               negotiation is in flight, copied into the caller's tensor if
//               the negotiation found the request ready everywhere with the
//               predicted descriptor; if not, the copy is thrown away and the
//               round goes on as usual;
//   in band     larger ones, up to 8 MiB, where the communicator's allreduce
//               confirms itself (over TCP the pairwise one; in one host's
//               shared memory every size, where it is free): no
//               negotiation. Each rank says alongside its first exchange
//               whether it has the request pending
//               (Communicator::AllreduceIfAllReady); when all do, the
//               allreduce finishes in the caller's tensor, otherwise nothing
//               was written and the round negotiates as usual.
// Copies grow with the size while the wait saved does not: larger tensors
// go in band.
//
// Every rank predicts from negotiated rounds only, which are identical on
// every rank, so all ranks run the speculative collective or none does, and
// with the same size; and all confirm it or none does. A rank that does not
// have the request pending takes part with zeros. A round confirmed in band
// is not observed (every rank skips it alike). Owned by the thread running
// the round, like the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/engine/engine_fusion.h"
#include "worker_runtime/engine/engine_negotiation.h"
#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {

// The bounds of the two ways above. A rank without the request takes part
// with zeros in the fusion buffer: past the first bound, only what fusion
// itself may grow that buffer to (the fusion threshold) is predicted.
constexpr size_t kMaxCopiedSpeculativeBytes = size_t{1} << 20;
constexpr size_t kMaxInBandSpeculativeBytes = size_t{8} << 20;
// At 2 ranks an allreduce is one exchange each way per round and a
// negotiation costs less than at 4: copies in and out of the fusion buffer
// cost more than the wait they hide from 1 MiB on. So at 2 ranks only this
// much goes on a copy, the rest in band.
constexpr size_t kMaxSpeculativeBytesAtTwoRanks = size_t{256} << 10;

// What the next round is predicted to be: everything needed to run the same
// allreduce without the request (a rank may not have it pending).
struct PredictedAllreduce {
  std::string name;
  std::string descriptor;
  DType dtype = DType::kFloat32;
  int64_t elements = 0;
  AllreduceOptions options;

  size_t nbytes() const { return static_cast<size_t>(elements) * DTypeSize(dtype); }
};

class AllreducePredictor {
 public:
  // After every round, with its negotiated outcome and the requests this
  // rank had in it (before any completed).
  void Observe(const NegotiationResult& round, const std::vector<Request>& taken);
  // Forgets everything (a new ring).
  void Reset();

  const std::optional<PredictedAllreduce>& prediction() const { return prediction_; }

 private:
  std::string last_name_;
  std::string last_descriptor_;
  int streak_ = 0;  // rounds in a row that were exactly that one allreduce
  std::optional<PredictedAllreduce> prediction_;
};

// How a round on `comm` speculates on `predicted` (the same answer on every
// rank: it depends on the size, the number of ranks and the kind of
// communicator only). Where the confirmation is free (one host's shared
// memory carries the ready words in its first round), in band at every size.
enum class Speculation { kNone, kOnCopy, kInBand };
Speculation ChooseSpeculation(const Communicator& comm, const PredictedAllreduce& predicted);

// kOnCopy, while the round's negotiation is in flight: reduces `predicted`
// into `fusion`, from this rank's tensor when `taken` holds the request with
// the predicted descriptor (the tensor is only read), from zeros when not.
absl::Status StartPredictedOnCopy(Communicator& comm, const PredictedAllreduce& predicted,
                                  const std::vector<Request>& taken, FusionBuffer& fusion);

// After StartPredictedOnCopy and the round's negotiation, on every rank: when
// the round found the predicted request ready with the predicted descriptor
// (so did every rank then), copies the result into the request's tensor and
// returns the request's index in `taken`; else nothing.
std::optional<size_t> FinishPredictedOnCopy(const PredictedAllreduce& predicted,
                                            const NegotiationResult& round,
                                            const std::vector<Request>& taken,
                                            FusionBuffer& fusion);

// kInBand, instead of the round's negotiation: the predicted allreduce
// confirms itself (AllreduceIfAllReady), this rank ready when `taken` holds
// the request with the predicted descriptor: on the request's tensor, or on
// zeros in `fusion`. When every rank was ready the request is done: returns
// its index in `taken`. Else nothing was written, on every rank, and the
// round negotiates as usual.
absl::StatusOr<std::optional<size_t>> RunPredictedInBand(Communicator& comm,
                                                         const PredictedAllreduce& predicted,
                                                         const std::vector<Request>& taken,
                                                         FusionBuffer& fusion);

}  // namespace horovodd::internal
