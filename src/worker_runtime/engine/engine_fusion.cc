#include "worker_runtime/engine/engine_fusion.h"

#include <algorithm>
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
// The last int is the root of a broadcast.
using FusionKey = std::tuple<RequestKind, DType, ReduceOp, double, double, int>;

std::optional<FusionKey> KeyOf(const Request& r) {
  if (r.kind == RequestKind::kAllreduce || r.kind == RequestKind::kReducescatter) {
    return FusionKey{r.kind,
                     r.tensors.front().dtype,
                     r.options.op,
                     r.options.prescale_factor,
                     r.options.postscale_factor,
                     0};
  }
  // Broadcast moves bytes: any dtypes fuse, only the root must match.
  if (r.kind == RequestKind::kBroadcast) {
    return FusionKey{r.kind, DType::kUInt8, ReduceOp::kSum, 1.0, 1.0, r.root};
  }
  return std::nullopt;  // allgather, join and opaque requests run alone
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

// Rows rank `rank` of `ranks` gets of `rows` (Horovod's split: the first
// rows % ranks ranks one more), and the first of them.
int64_t ShareRows(int64_t rows, int ranks, int rank) {
  return rows / ranks + (rank < rows % ranks ? 1 : 0);
}
int64_t ShareStart(int64_t rows, int ranks, int rank) {
  return rank * (rows / ranks) + std::min<int64_t>(rank, rows % ranks);
}

// One reducescatter, or several fused: the communicator's reducescatter
// gives each rank one row of a [ranks, width] fusion buffer whose row r
// holds every tensor's rank-r share back to back, zero-padded to the
// widest share (at most one row per tensor more than its own), so that
// ranks with a row fewer of a tensor still line up.
absl::Status RunReducescatter(const Batch& batch, Communicator& comm, FusionBuffer& fusion,
                              const ActivityObserver& activity,
                              std::vector<std::optional<Tensor>>* outputs) {
  const Request& first = *batch.requests.front();
  ReducescatterOptions options;
  options.op = first.options.op;
  options.prescale_factor = first.options.prescale_factor;
  options.postscale_factor = first.options.postscale_factor;
  outputs->resize(batch.requests.size());
  if (batch.requests.size() == 1) {
    Announce(activity, CollectiveActivity(batch));
    HVDD_ASSIGN_OR_RETURN(Tensor result, comm.Reducescatter(first.tensors.front(), options));
    outputs->front() = std::move(result);
    return absl::OkStatus();
  }
  const int ranks = comm.size();
  const int me = comm.rank();
  const DType dtype = first.tensors.front().dtype;
  const size_t element = DTypeSize(dtype);
  int64_t width = 0;  // elements in a row of the fusion buffer
  for (int r = 0; r < ranks; ++r) {
    int64_t row = 0;
    for (const Request* request : batch.requests) {
      const TensorView& t = request->tensors.front();
      row += ShareRows(t.shape.front(), ranks, r) * t.row_numel();
    }
    width = std::max(width, row);
  }
  const size_t row_bytes = static_cast<size_t>(width) * element;
  Announce(activity, "MEMCPY_IN_FUSION_BUFFER");
  uint8_t* buffer = fusion.Reserve(row_bytes * ranks);
  if (row_bytes * ranks > 0) std::memset(buffer, 0, row_bytes * ranks);
  for (int r = 0; r < ranks; ++r) {
    uint8_t* at = buffer + r * row_bytes;
    for (const Request* request : batch.requests) {
      const TensorView& t = request->tensors.front();
      const int64_t rows = t.shape.front();
      const size_t bytes = static_cast<size_t>(ShareRows(rows, ranks, r) * t.row_numel()) * element;
      const size_t from = static_cast<size_t>(ShareStart(rows, ranks, r) * t.row_numel()) * element;
      if (bytes > 0) CopyBytes(at, static_cast<const uint8_t*>(t.data) + from, bytes);
      at += bytes;
    }
  }
  TensorView fused{buffer, dtype, {ranks, width}, Device{}};
  Announce(activity, CollectiveActivity(batch));
  HVDD_ASSIGN_OR_RETURN(const Tensor mine, comm.Reducescatter(fused, options));
  Announce(activity, "MEMCPY_OUT_FUSION_BUFFER");
  const uint8_t* at = static_cast<const uint8_t*>(mine.data());
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const TensorView& t = batch.requests[i]->tensors.front();
    std::vector<int64_t> shape = t.shape;
    shape.front() = ShareRows(shape.front(), ranks, me);
    Tensor result(dtype, std::move(shape));
    if (result.nbytes() > 0) CopyBytes(result.data(), at, result.nbytes());
    at += result.nbytes();
    (*outputs)[i] = std::move(result);
  }
  return absl::OkStatus();
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
    case RequestKind::kReducescatter:
      return comm(
          [&](Communicator& c) { return RunReducescatter(batch, c, fusion, activity, outputs); });
    case RequestKind::kJoin:
      break;  // the engine completes joins itself (Engine::RunReady)
  }
  return absl::InternalError("unknown request kind");
}

}  // namespace horovodd::internal
