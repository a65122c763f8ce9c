// The synchronous collectives of horovodd.h: each enqueues a request on the
// current runtime's engine and waits for it, so they are ordered with the
// asynchronous ones (async.h) and only the engine thread touches the ring.
// Their requests are urgent: the engine negotiates at once.
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "horovodd/async.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/gloo/gloo_ops.h"
#include "worker_runtime/runtime/engine_api.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd {
namespace {

using internal::CurrentRuntime;
using internal::Runtime;
using internal::SyncName;

absl::Status NotInitialized(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(what, " needs horovodd::Init() first"));
}

absl::Status StatusOf(const absl::Status& status) { return status; }
absl::Status StatusOf(const absl::StatusOr<Tensor>& result) { return result.status(); }

absl::Status WaitFor(const absl::StatusOr<Handle>& handle) {
  if (!handle.ok()) return handle.status();
  return handle->Wait();
}

// Runs `op` on the engine thread, alone, as one request named after
// `operation`; its result stays in `result`. CUDA tensors go to the GPU
// collectives, the others to the ring. The request describes no tensor:
// these ops exchange and check their arguments themselves (alltoall's ranks
// may send different first dimensions).
template <typename Result>
absl::Status RunAlone(Runtime& runtime, const char* operation, const TensorView* tensor,
                      int process_set_id,
                      std::function<Result(internal::GlooContext&)> on_ring,
                      std::function<Result(internal::GpuCollectives&)> on_gpu, Result* result) {
  const bool cuda = tensor != nullptr && tensor->device.type == DeviceType::kCUDA;
  if (cuda && process_set_id != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, ": collectives on CUDA tensors run on the global process set only (got set ",
        process_set_id, ")"));
  }
  auto run = [&runtime, cuda, process_set_id, &on_ring, &on_gpu,
              result](std::optional<Tensor>*) {
    if (cuda) {
      *result = on_gpu(runtime.gpu());
      return StatusOf(*result);
    }
    return runtime.RunCollective(process_set_id, [&](internal::GlooContext& ring) {
      *result = on_ring(ring);
      return StatusOf(*result);
    });
  };
  return WaitFor(internal::EnqueueOpaque(runtime, SyncName(operation, ""), operation,
                                         /*tensors=*/{}, run, /*urgent=*/true, process_set_id));
}

}  // namespace

absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Allreduce");
  return WaitFor(internal::EnqueueAllreduce(*runtime, SyncName("allreduce", options.name),
                                            {std::move(inout)}, options, /*urgent=*/true));
}

absl::StatusOr<Tensor> Allgather(const TensorView& input, int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Allgather");
  HVDD_ASSIGN_OR_RETURN(Handle handle,
                        internal::EnqueueAllgather(*runtime, SyncName("allgather", ""), input,
                                                   /*urgent=*/true, process_set_id));
  return handle.TakeOutput();
}

absl::Status Broadcast(TensorView inout, int root, int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Broadcast");
  return WaitFor(internal::EnqueueBroadcast(*runtime, SyncName("broadcast", ""),
                                            std::move(inout), root, /*urgent=*/true,
                                            process_set_id));
}

absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits, int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Alltoall");
  absl::StatusOr<Tensor> result = absl::UnknownError("alltoall did not run");
  absl::Status status = RunAlone<absl::StatusOr<Tensor>>(
      *runtime, "alltoall", &input, process_set_id,
      [&](internal::GlooContext& ring) {
        return internal::Alltoall(ring, input, splits, received_splits);
      },
      [&](internal::GpuCollectives& gpu) { return gpu.Alltoall(input, splits, received_splits); },
      &result);
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op, int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Reducescatter");
  absl::StatusOr<Tensor> result = absl::UnknownError("reducescatter did not run");
  HVDD_RETURN_IF_ERROR(RunAlone<absl::StatusOr<Tensor>>(
      *runtime, "reducescatter", &input, process_set_id,
      [&](internal::GlooContext& ring) { return internal::Reducescatter(ring, input, op); },
      [&](internal::GpuCollectives& gpu) { return gpu.Reducescatter(input, op); }, &result));
  return result;
}

absl::Status Barrier(int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Barrier");
  absl::Status result;
  return RunAlone<absl::Status>(
      *runtime, "barrier", nullptr, process_set_id,
      [](internal::GlooContext& ring) { return internal::Barrier(ring); },
      [](internal::GpuCollectives&) { return absl::OkStatus(); }, &result);
}

absl::StatusOr<int> Join() {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("Join");
  HVDD_ASSIGN_OR_RETURN(Handle handle, internal::EnqueueJoin(*runtime));
  HVDD_ASSIGN_OR_RETURN(const Tensor last, handle.TakeOutput());
  return *last.data_as<int32_t>();
}

}  // namespace horovodd
