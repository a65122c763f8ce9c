#include "worker_runtime/engine/engine_fusion.h"

#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/engine/engine_timeline.h"
#include "worker_runtime/tensor/copy_bytes.h"

namespace horovodd::internal {
namespace {

// What requests must share to be fused into one collective.
// The last int is the root of a broadcast, or how many ranks contributed to
// an allreduce (while ranks have joined: what an average divides by).
using FusionKey = std::tuple<RequestKind, DType, ReduceOp, double, double, int>;

std::optional<FusionKey> KeyOf(const Request& r) {
  if (r.kind == RequestKind::kAllreduce) {
    return FusionKey{r.kind,
                     r.tensors.front().dtype,
                     r.options.op,
                     r.options.prescale_factor,
                     r.options.postscale_factor,
                     r.options.contributors};
  }
  // Broadcast moves bytes: any dtypes fuse, only the root must match.
  if (r.kind == RequestKind::kBroadcast) {
    return FusionKey{r.kind, DType::kUInt8, ReduceOp::kSum, 1.0, 1.0, r.root};
  }
  return std::nullopt;  // allgather and opaque requests run alone
}

// "a", or "a + 4 fused": the name of a fused collective in errors.
std::string BatchName(const Batch& batch) {
  const std::string& first = batch.requests.front()->name;
  if (batch.requests.size() == 1) return first;
  return absl::StrCat(first, " + ", batch.requests.size() - 1, " fused");
}

size_t TensorCount(const Batch& batch) {
  size_t count = 0;
  for (const Request* r : batch.requests) count += r->tensors.size();
  return count;
}

size_t TotalBytes(const Batch& batch) {
  size_t bytes = 0;
  for (const Request* r : batch.requests) bytes += r->nbytes();
  return bytes;
}

// Copies every tensor of the batch into `buffer`, back to back.
void Pack(const Batch& batch, uint8_t* buffer) {
  for (const Request* r : batch.requests) {
    for (const TensorView& t : r->tensors) {
      if (t.nbytes() > 0) CopyBytes(buffer, t.data, t.nbytes());
      buffer += t.nbytes();
    }
  }
}

void Unpack(const Batch& batch, const uint8_t* buffer) {
  for (const Request* r : batch.requests) {
    for (const TensorView& t : r->tensors) {
      if (t.nbytes() > 0) CopyBytes(t.data, buffer, t.nbytes());
      buffer += t.nbytes();
    }
  }
}

void Announce(const ActivityObserver& activity, const std::string& name) {
  if (activity) activity(name);
}

// "GLOO_ALLREDUCE": the batch's collective, as the timeline names it.
std::string CollectiveActivity(const Batch& batch) {
  return absl::StrCat("GLOO_", TimelineOperationOf(*batch.requests.front()));
}

// What runs on one tensor: the batch's only one, or the fusion buffer.
using Collective = absl::FunctionRef<absl::Status(TensorView)>;

// Runs `collective` on the batch: on its only tensor in place, or on all of
// them packed into the fusion buffer as one tensor of `dtype` (unpacked
// after), announcing each activity as Horovod's timeline names it.
absl::Status RunFusable(const Batch& batch, DType dtype, FusionBuffer& fusion,
                        const ActivityObserver& activity, Collective collective) {
  const std::string collective_activity = CollectiveActivity(batch);
  if (TensorCount(batch) == 1) {  // in place, no copies
    Announce(activity, collective_activity);
    return collective(batch.requests.front()->tensors.front());
  }
  const size_t bytes = TotalBytes(batch);
  Announce(activity, "MEMCPY_IN_FUSION_BUFFER");
  uint8_t* buffer = fusion.Reserve(bytes);
  Pack(batch, buffer);
  TensorView fused{buffer, dtype, {static_cast<int64_t>(bytes / DTypeSize(dtype))}, Device{}};
  Announce(activity, collective_activity);
  HVDD_RETURN_IF_ERROR(collective(std::move(fused)));
  Announce(activity, "MEMCPY_OUT_FUSION_BUFFER");
  Unpack(batch, buffer);
  return absl::OkStatus();
}

std::vector<TensorView> TensorsOf(const Batch& batch) {
  std::vector<TensorView> tensors;
  tensors.reserve(TensorCount(batch));
  for (const Request* r : batch.requests) {
    tensors.insert(tensors.end(), r->tensors.begin(), r->tensors.end());
  }
  return tensors;
}

absl::Status RunAllreduce(const Batch& batch, Communicator& comm, FusionBuffer& fusion,
                          const ActivityObserver& activity) {
  const Request& first = *batch.requests.front();
  AllreduceOptions options = first.options;
  if (batch.requests.size() > 1) options.name = BatchName(batch);
  // Where the communicator reads the tensors where they lie (one host's
  // shared memory), the fusion buffer's two copies are skipped. Every rank's
  // communicator is of the same kind, so all of them agree.
  if (TensorCount(batch) > 1 && comm.ReducesPartsInPlace()) {
    Announce(activity, CollectiveActivity(batch));
    return comm.AllreduceParts(TensorsOf(batch), options);
  }
  return RunFusable(batch, first.tensors.front().dtype, fusion, activity,
                    [&](TensorView t) { return comm.Allreduce(std::move(t), options); });
}

// Broadcast moves bytes: the fused tensor is uint8.
absl::Status RunBroadcast(const Batch& batch, Communicator& comm, FusionBuffer& fusion,
                          const ActivityObserver& activity) {
  const int root = batch.requests.front()->root;
  return RunFusable(batch, DType::kUInt8, fusion, activity,
                    [&](TensorView t) { return comm.Broadcast(std::move(t), root); });
}

}  // namespace

uint8_t* FusionBuffer::Reserve(size_t bytes) {
  if (bytes_.size() < bytes) bytes_.resize(bytes);
  return bytes_.data();
}

std::vector<Batch> PlanBatches(const std::vector<Request*>& ready, int64_t fusion_threshold) {
  std::vector<Batch> batches;
  // Fusion key -> the batch still taking requests of that key, and its size.
  std::map<FusionKey, std::pair<size_t, int64_t>> open;
  for (Request* request : ready) {
    const int64_t bytes = static_cast<int64_t>(request->nbytes());
    std::optional<FusionKey> key = KeyOf(*request);
    if (key.has_value()) {
      auto it = open.find(*key);
      if (it != open.end() && it->second.second + bytes <= fusion_threshold) {
        batches[it->second.first].requests.push_back(request);
        it->second.second += bytes;
        continue;
      }
      open[*key] = {batches.size(), bytes};
    }
    batches.push_back(Batch{request->kind, {request}});
  }
  return batches;
}

absl::Status RunBatch(const Batch& batch, const CommunicatorRunner& comm, FusionBuffer& fusion,
                      std::vector<std::optional<Tensor>>* outputs,
                      const ActivityObserver& activity) {
  switch (batch.kind) {
    case RequestKind::kAllreduce:
      return comm([&](Communicator& c) { return RunAllreduce(batch, c, fusion, activity); });
    case RequestKind::kBroadcast:
      return comm([&](Communicator& c) { return RunBroadcast(batch, c, fusion, activity); });
    case RequestKind::kAllgather: {
      const TensorView& input = batch.requests.front()->tensors.front();
      absl::StatusOr<Tensor> result;
      Announce(activity, CollectiveActivity(batch));
      HVDD_RETURN_IF_ERROR(comm([&](Communicator& c) {
        result = c.Allgather(input);
        return result.status();
      }));
      outputs->assign(1, *std::move(result));
      return absl::OkStatus();
    }
    case RequestKind::kOpaque:
      outputs->resize(1);
      Announce(activity, CollectiveActivity(batch));
      return batch.requests.front()->run(&outputs->front());
    case RequestKind::kJoin:
      break;  // the engine completes joins itself (Engine::RunReady)
  }
  return absl::InternalError("unknown request kind");
}

}  // namespace horovodd::internal
