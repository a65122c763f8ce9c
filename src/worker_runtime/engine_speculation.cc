#include "worker_runtime/engine_speculation.h"

#include <algorithm>
#include <cstring>

#include "worker_runtime/gloo_ops.h"

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
// allreduce in host memory, small enough (see kMaxSpeculativeBytes).
bool Predictable(const Request& r) {
  return r.kind == RequestKind::kAllreduce && r.tensors.size() == 1 &&
         r.tensors.front().device.type == DeviceType::kCPU && r.nbytes() > 0 &&
         r.nbytes() <= kMaxSpeculativeBytes;
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
  if (lone == nullptr || !Predictable(*lone)) {
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
    prediction_ = PredictedAllreduce{lone->name, lone->descriptor, t.dtype, t.numel(),
                                     lone->options};
  }
}

void AllreducePredictor::Reset() {
  last_name_.clear();
  last_descriptor_.clear();
  streak_ = 0;
  prediction_.reset();
}

absl::Status ReducePredicted(gloo::Context& context, const PredictedAllreduce& predicted,
                             const std::vector<Request>& taken, FusionBuffer& fusion) {
  uint8_t* buffer = fusion.Reserve(predicted.nbytes());
  if (const Request* mine = FindPending(taken, predicted.name, predicted.descriptor)) {
    std::memcpy(buffer, mine->tensors.front().data, predicted.nbytes());
  } else {
    std::memset(buffer, 0, predicted.nbytes());
  }
  TensorView view{buffer, predicted.dtype, {predicted.elements}, Device{}};
  return Allreduce(context, view, predicted.options);
}

std::optional<size_t> TakeConfirmed(const PredictedAllreduce& predicted,
                                    const NegotiationResult& round,
                                    const std::vector<Request>& taken, FusionBuffer& fusion) {
  if (std::find(round.ready.begin(), round.ready.end(), predicted.name) == round.ready.end()) {
    return std::nullopt;
  }
  const Request* mine = FindPending(taken, predicted.name, predicted.descriptor);
  // Ready everywhere with one descriptor: if it is not the predicted one
  // here, it is not anywhere, and every rank runs it the usual way.
  if (mine == nullptr) return std::nullopt;
  std::memcpy(mine->tensors.front().data, fusion.Reserve(predicted.nbytes()), predicted.nbytes());
  return static_cast<size_t>(mine - taken.data());
}

}  // namespace horovodd::internal
