#include "worker_runtime/engine/engine_speculation.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/status_macros.h"
#include "worker_runtime/tensor/copy_bytes.h"

namespace horovodd::internal {
namespace {

const Request* FindPending(const std::vector<Request>& taken, const std::string& name,
                           const std::string& descriptor) {
  for (const Request& r : taken) {
    if (r.name == name) return r.descriptor == descriptor ? &r : nullptr;
  }
  return nullptr;
}

// A lone request the engine can run speculatively: a plain single-tensor
// allreduce in host memory, within the fusion buffer's bounds.
bool Predictable(const Request& r, int64_t fusion_threshold) {
  return r.kind == RequestKind::kAllreduce && r.tensors.size() == 1 &&
         r.tensors.front().device.type == DeviceType::kCPU && r.nbytes() > 0 &&
         r.nbytes() <= kMaxInBandSpeculativeBytes &&
         (r.nbytes() <= kMaxCopiedSpeculativeBytes ||
          static_cast<int64_t>(r.nbytes()) <= fusion_threshold);
}

TensorView WorkIn(FusionBuffer& fusion, const PredictedAllreduce& predicted) {
  return TensorView{
      fusion.Reserve(predicted.nbytes()), predicted.dtype, {predicted.elements}, Device{}};
}

}  // namespace

void AllreducePredictor::Observe(const NegotiationResult& round,
                                 const std::vector<Request>& taken) {
  const Request* lone = nullptr;
  if (round.ready.size() == 1 && round.conflicts.empty()) {
    for (const Request& r : taken) {
      if (r.name == round.ready.front()) lone = &r;
    }
  }
  // Ready means every rank has it with one descriptor, so every rank sees
  // the same `lone` and decides the same.
  if (lone == nullptr || !Predictable(*lone, round.fusion_threshold)) {
    Reset();
    return;
  }
  if (lone->name == last_name_ && lone->descriptor == last_descriptor_) {
    ++streak_;
  } else {
    last_name_ = lone->name;
    last_descriptor_ = lone->descriptor;
    streak_ = 1;
    prediction_.reset();
  }
  if (streak_ >= 2 && !prediction_) {
    const TensorView& t = lone->tensors.front();
    prediction_ =
        PredictedAllreduce{lone->name, lone->descriptor, t.dtype, t.numel(), lone->options};
  }
}

void AllreducePredictor::Reset() {
  last_name_.clear();
  last_descriptor_.clear();
  streak_ = 0;
  prediction_.reset();
}

Speculation ChooseSpeculation(const Communicator& comm, const PredictedAllreduce& predicted) {
  const TensorView shape{nullptr, predicted.dtype, {predicted.elements}, Device{}};
  const SelfConfirmation confirmation = comm.ConfirmsItself(shape, predicted.options);
  if (confirmation == SelfConfirmation::kFree) return Speculation::kInBand;
  const size_t on_copy_bytes =
      comm.size() == 2 ? kMaxSpeculativeBytesAtTwoRanks : kMaxCopiedSpeculativeBytes;
  if (predicted.nbytes() <= on_copy_bytes) return Speculation::kOnCopy;
  return confirmation == SelfConfirmation::kInBand ? Speculation::kInBand : Speculation::kNone;
}

absl::Status StartPredictedOnCopy(Communicator& comm, const PredictedAllreduce& predicted,
                                  const std::vector<Request>& taken, FusionBuffer& fusion) {
  TensorView work = WorkIn(fusion, predicted);
  if (const Request* mine = FindPending(taken, predicted.name, predicted.descriptor)) {
    CopyBytes(work.data, mine->tensors.front().data, predicted.nbytes());
  } else {
    std::memset(work.data, 0, predicted.nbytes());  // this rank finishes nothing
  }
  return comm.Allreduce(std::move(work), predicted.options);
}

std::optional<size_t> FinishPredictedOnCopy(const PredictedAllreduce& predicted,
                                            const NegotiationResult& round,
                                            const std::vector<Request>& taken,
                                            FusionBuffer& fusion) {
  if (std::find(round.ready.begin(), round.ready.end(), predicted.name) == round.ready.end()) {
    return std::nullopt;
  }
  const Request* mine = FindPending(taken, predicted.name, predicted.descriptor);
  // Ready everywhere with one descriptor: if it is not the predicted one
  // here, it is not anywhere, and every rank runs it the usual way.
  if (mine == nullptr) return std::nullopt;
  CopyBytes(mine->tensors.front().data, WorkIn(fusion, predicted).data, predicted.nbytes());
  return static_cast<size_t>(mine - taken.data());
}

absl::StatusOr<std::optional<size_t>> RunPredictedInBand(Communicator& comm,
                                                         const PredictedAllreduce& predicted,
                                                         const std::vector<Request>& taken,
                                                         FusionBuffer& fusion) {
  const Request* mine = FindPending(taken, predicted.name, predicted.descriptor);
  TensorView tensor;
  if (mine != nullptr) {
    tensor = mine->tensors.front();
  } else {
    tensor = WorkIn(fusion, predicted);
    std::memset(tensor.data, 0, predicted.nbytes());  // only read, then dropped
  }
  HVDD_ASSIGN_OR_RETURN(const bool all_ready, comm.AllreduceIfAllReady(std::move(tensor),
                                                                      mine != nullptr,
                                                                      predicted.options));
  if (!all_ready) return std::nullopt;
  return static_cast<size_t>(mine - taken.data());
}

}  // namespace horovodd::internal
