// Overlapping a round's negotiation with the collective it is about to agree
// on.
//
// A loop that calls one synchronous allreduce per step (a loss, a metric, a
// flat gradient buffer) makes every round the same: one request, same name,
// same descriptor. Negotiating it and then reducing it costs two exchanges
// that each wait for every rank: the negotiation waits for the slowest rank
// to finish the previous collective, and on a busy machine (more processes
// than cores) it costs about as much as a small allreduce and a quarter of a
// 4 MiB one. So after two such rounds in a row every rank predicts that the
// next round is the same again and, in it, reduces the predicted tensor
// while the negotiation's messages are in flight, one of two ways:
//   on a copy   up to 1 MiB: the whole allreduce on a copy in the fusion
//               buffer, copied into the caller's tensor if confirmed;
//   in halves   above that, up to 8 MiB, where the allreduce splits
//               (gloo_ops.h, AllreduceFirstHalf: the pairwise algorithm):
//               the exchange of every rank's parts, which only reads the
//               caller's tensor, then, if confirmed, the exchange of the
//               results into it.
// Measured against raw Gloo at 4 ranks on loopback (2 cores): copies grow
// with the size while the wait saved does not (4 MiB on a copy lost 10%);
// halves cost a second wait for the negotiation in the middle, which small
// tensors feel (256 KiB: 1.41 on a copy, 0.87 in halves) and the largest
// too (16 MiB: 0.91 without speculation, 0.86 in halves), while 2 to 8 MiB
// gain (4 MiB: 0.89 to 1.06).
// The negotiation decides as always. If it found the predicted request
// ready everywhere with the predicted descriptor, the caller's tensor gets
// the result. If not, the speculative work is thrown away, the prediction
// is dropped and the round goes on as usual.
//
// Every rank predicts from negotiated rounds only, which are identical on
// every rank, so all ranks run the speculative collective or none does, and
// with the same size; and all confirm it or none does. A rank that does not
// have the request pending takes part with zeros. Owned by the thread
// running the round, like the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gloo/context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/engine_fusion.h"
#include "worker_runtime/engine_negotiation.h"
#include "worker_runtime/engine_request.h"

namespace horovodd::internal {

// The bounds of the two ways above. Speculation keeps its work in the
// fusion buffer: past the first bound, only what fusion itself may grow
// that buffer to (the fusion threshold) is predicted.
constexpr size_t kMaxCopiedSpeculativeBytes = size_t{1} << 20;
constexpr size_t kMaxSplitSpeculativeBytes = size_t{8} << 20;
// At 2 ranks an allreduce is one exchange each way per round and a
// negotiation costs less than at 4: copies in and out of the fusion buffer
// lost more than the wait they hid from 1 MiB on (best of 7 interleaved
// runs against raw Gloo, pairwise allreduce: 1 MiB 0.85 on a copy, 1.01
// without; 2 MiB 0.86 in halves, 1.08 without), while 256 KiB gained (1.43
// on a copy, 0.94 without). So at 2 ranks only this much is speculated, on
// a copy.
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

// How a round on `context` speculates on `predicted` (the same answer on
// every rank: it depends on the size and the number of ranks only).
enum class Speculation { kNone, kOnCopy, kInHalves };
Speculation ChooseSpeculation(const gloo::Context& context, const PredictedAllreduce& predicted);

// Reduces `predicted` the `how` way (not kNone), into `fusion`: this rank's
// tensor when `taken` holds the request with the predicted descriptor (the
// tensor is only read), zeros when not.
absl::Status StartPredicted(gloo::Context& context, const PredictedAllreduce& predicted,
                            Speculation how, const std::vector<Request>& taken,
                            FusionBuffer& fusion);

// After StartPredicted and the round's negotiation, on every rank: when the
// round found the predicted request ready with the predicted descriptor (so
// did every rank then), puts the result in the request's tensor (in halves:
// a collective) and returns the request's index in `taken`; else nothing,
// and no transfers.
absl::StatusOr<std::optional<size_t>> FinishPredicted(gloo::Context& context,
                                                      const PredictedAllreduce& predicted,
                                                      Speculation how,
                                                      const NegotiationResult& round,
                                                      const std::vector<Request>& taken,
                                                      FusionBuffer& fusion);

}  // namespace horovodd::internal
