// The synchronous collectives of horovodd.h: each starts a request on the
// current runtime's engine (Start*, engine_api.h) and waits for it, so they
// are ordered with the asynchronous ones (async.h) and only the engine thread
// touches the ring. Their requests are urgent: the engine negotiates at once.
//
// A request owns everything it uses except the caller's tensors: the Python
// bindings wait for it in slices and may leave early (a signal), and then the
// request runs on with nothing of the caller's frame (python/blocking_call.h).
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "horovodd/async.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/runtime/engine_api.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::internal {
namespace {

using AloneResult = absl::StatusOr<std::optional<Tensor>>;
using AloneOp = std::function<AloneResult(Communicator&)>;

// Enqueues `op` to run on the set's engine thread, alone, on the set's
// communicator (for a CUDA tensor, the GPU one), as one request named after
// `operation`; with `produces_output`, the tensor it returns is the handle's
// output. `op` owns what it uses. The request describes no tensor: these
// ops exchange and check their arguments themselves (alltoall's ranks may
// send different first dimensions).
absl::StatusOr<Handle> StartAlone(Runtime& runtime, const char* operation, const TensorView* tensor,
                                  int process_set_id, bool produces_output, AloneOp op) {
  const bool cuda = tensor != nullptr && tensor->device.type == DeviceType::kCUDA;
  if (cuda && process_set_id != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, ": collectives on CUDA tensors run on the global process set only (got set ",
        process_set_id, ")"));
  }
  std::optional<TensorView> on_gpu;
  if (cuda) on_gpu = *tensor;
  auto run = [&runtime, operation, on_gpu = std::move(on_gpu), process_set_id,
              op = std::move(op)](std::optional<Tensor>* output) -> absl::Status {
    auto keep = [&](Communicator& comm) -> absl::Status {
      HVDD_ASSIGN_OR_RETURN(*output, op(comm));
      return absl::OkStatus();
    };
    if (on_gpu.has_value()) return runtime.gpu().Run(operation, *on_gpu, keep);
    return runtime.RunCollective(process_set_id, keep);
  };
  return EnqueueOpaque(runtime, SyncName(operation, ""), operation, /*tensors=*/{}, std::move(run),
                       /*urgent=*/true, process_set_id, produces_output);
}

}  // namespace

absl::StatusOr<Runtime*> RuntimeFor(const char* operation) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(operation, " needs horovodd::Init() first"));
  }
  return runtime;
}

absl::StatusOr<Handle> StartAllreduce(Runtime& runtime, TensorView inout,
                                      const AllreduceOptions& options) {
  return EnqueueAllreduce(runtime, SyncName("allreduce", options.name), {std::move(inout)}, options,
                          /*urgent=*/true);
}

absl::StatusOr<Handle> StartAllgather(Runtime& runtime, TensorView input, int process_set_id) {
  return EnqueueAllgather(runtime, SyncName("allgather", ""), std::move(input), /*urgent=*/true,
                          process_set_id);
}

absl::StatusOr<Handle> StartBroadcast(Runtime& runtime, TensorView inout, int root,
                                      int process_set_id) {
  return EnqueueBroadcast(runtime, SyncName("broadcast", ""), std::move(inout), root,
                          /*urgent=*/true, process_set_id);
}

absl::StatusOr<Handle> StartAlltoall(Runtime& runtime, TensorView input,
                                     std::vector<int64_t> splits,
                                     std::shared_ptr<std::vector<int64_t>> received_splits,
                                     int process_set_id) {
  HVDD_CHECK(received_splits != nullptr);
  return StartAlone(runtime, "alltoall", &input, process_set_id, /*produces_output=*/true,
                    [input, splits, received_splits](Communicator& comm) -> AloneResult {
                      return comm.Alltoall(input, splits, received_splits.get());
                    });
}

absl::StatusOr<Handle> StartReducescatter(Runtime& runtime, TensorView input,
                                          const AllreduceOptions& options) {
  return EnqueueReducescatter(runtime, SyncName("reducescatter", options.name), std::move(input),
                              options, /*urgent=*/true);
}

absl::StatusOr<Handle> StartBarrier(Runtime& runtime, int process_set_id) {
  return StartAlone(runtime, "barrier", nullptr, process_set_id, /*produces_output=*/false,
                    [](Communicator& comm) -> AloneResult {
                      HVDD_RETURN_IF_ERROR(comm.Barrier());
                      return std::nullopt;
                    });
}

absl::StatusOr<Handle> StartAdasum(Runtime& runtime, TensorView inout, double prescale_factor,
                                   double postscale_factor, int process_set_id) {
  return StartAlone(runtime, "adasum", &inout, process_set_id, /*produces_output=*/false,
                    [inout, prescale_factor, postscale_factor](Communicator& comm) -> AloneResult {
                      HVDD_RETURN_IF_ERROR(comm.Adasum(inout, prescale_factor, postscale_factor));
                      return std::nullopt;
                    });
}

}  // namespace horovodd::internal

namespace horovodd {
namespace {

using internal::Runtime;
using internal::RuntimeFor;

absl::Status WaitFor(const absl::StatusOr<Handle>& handle) {
  if (!handle.ok()) return handle.status();
  return handle->Wait();
}

absl::StatusOr<Tensor> OutputOf(const absl::StatusOr<Handle>& handle) {
  if (!handle.ok()) return handle.status();
  return handle->TakeOutput();
}

}  // namespace

absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Allreduce"));
  return WaitFor(internal::StartAllreduce(*runtime, std::move(inout), options));
}

absl::StatusOr<Tensor> Allgather(const TensorView& input, int process_set_id) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Allgather"));
  return OutputOf(internal::StartAllgather(*runtime, input, process_set_id));
}

absl::Status Broadcast(TensorView inout, int root, int process_set_id) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Broadcast"));
  return WaitFor(internal::StartBroadcast(*runtime, std::move(inout), root, process_set_id));
}

absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits, int process_set_id) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Alltoall"));
  auto received = std::make_shared<std::vector<int64_t>>();
  HVDD_ASSIGN_OR_RETURN(
      Tensor output,
      OutputOf(internal::StartAlltoall(*runtime, input, splits, received, process_set_id)));
  if (received_splits != nullptr) *received_splits = *received;
  return output;
}

absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op, int process_set_id) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Reducescatter"));
  AllreduceOptions options;
  options.op = op;
  options.process_set_id = process_set_id;
  return OutputOf(internal::StartReducescatter(*runtime, input, options));
}

absl::Status Barrier(int process_set_id) {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Barrier"));
  return WaitFor(internal::StartBarrier(*runtime, process_set_id));
}

absl::StatusOr<int> Join() {
  HVDD_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor("Join"));
  HVDD_ASSIGN_OR_RETURN(const Tensor last, OutputOf(internal::EnqueueJoin(*runtime)));
  return *last.data_as<int32_t>();
}

}  // namespace horovodd
