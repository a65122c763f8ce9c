#include "worker_runtime/runtime/engine_api.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "horovodd/process_sets.h"
#include "worker_runtime/engine/engine.h"
#include "worker_runtime/engine/engine_request.h"
#include "worker_runtime/runtime/runtime.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {
namespace {

absl::Status CheckName(const char* operation, const std::string& name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, ": an asynchronous collective needs a non-empty name"));
  }
  return absl::OkStatus();
}

bool OnCuda(const TensorView& tensor) { return tensor.device.type == DeviceType::kCUDA; }

constexpr char kSyncPrefix[] = "horovodd.sync.";

absl::StatusOr<Handle> Submit(const ProcessSetView& set, Request request, bool urgent) {
  request.descriptor = Describe(request).Encode();
  if (!IsSyncName(request.name)) request.error_prefix = absl::StrCat("'", request.name, "': ");
  return set.engine->Enqueue(std::move(request), urgent);
}

// The GPU collectives know the global set only.
absl::Status CheckGpuSet(const std::string& label, const TensorView& tensor, int set) {
  if (set == 0 || !OnCuda(tensor)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      label, ": collectives on CUDA tensors run on the global process set only (got set ", set,
      ")"));
}

// CPU tensors are checked here, so a bad one fails on its own rank at once
// instead of leaving its peers waiting in a collective it never joins; CUDA
// tensors are the GPU collectives' to check.
absl::Status CheckTensors(const std::string& label, const std::vector<TensorView>& tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": no tensors"));
  }
  for (const TensorView& t : tensors) {
    if (t.device.type != tensors.front().device.type || t.dtype != tensors.front().dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": a group's tensors must share one dtype and device; got ",
                       DTypeName(tensors.front().dtype), " and ", DTypeName(t.dtype)));
    }
    HVDD_RETURN_IF_ERROR(OnCuda(t) ? CheckTensorLayout(label, t) : CheckTensor(label, t));
  }
  return absl::OkStatus();
}

// The allreduce's and the reducescatter's pre- and postscale factors.
absl::Status CheckScaleFactors(const std::string& label, const AllreduceOptions& options) {
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "prescale_factor", options.prescale_factor));
  return CheckScaleFactor(label, "postscale_factor", options.postscale_factor);
}

}  // namespace

std::string SyncName(const char* operation, const std::string& user_name) {
  return absl::StrCat(kSyncPrefix, operation, user_name.empty() ? "" : ".", user_name);
}

bool IsSyncName(const std::string& name) { return absl::StartsWith(name, kSyncPrefix); }

absl::StatusOr<Handle> EnqueueAllreduce(Runtime& runtime, std::string name,
                                        std::vector<TensorView> inouts,
                                        const AllreduceOptions& options, bool urgent) {
  const std::string label = absl::StrCat("allreduce '", name, "'");
  HVDD_RETURN_IF_ERROR(CheckName("allreduce", name));
  HVDD_RETURN_IF_ERROR(CheckTensors(label, inouts));
  HVDD_RETURN_IF_ERROR(CheckReducible(label, inouts.front().dtype));
  HVDD_RETURN_IF_ERROR(CheckScaleFactors(label, options));
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(options.process_set_id));
  HVDD_RETURN_IF_ERROR(CheckGpuSet(label, inouts.front(), set.id));
  Request request;
  request.name = std::move(name);
  request.tensors = std::move(inouts);
  request.options = options;
  // Errors name the tensor: the request's name, or a synchronous call's own.
  if (!IsSyncName(request.name)) request.options.name = request.name;
  if (!OnCuda(request.tensors.front())) {
    request.kind = RequestKind::kAllreduce;
    return Submit(set, std::move(request), urgent);
  }
  request.kind = RequestKind::kOpaque;
  request.opaque_operation = "allreduce";
  request.run = [&runtime, tensors = request.tensors,
                 options = request.options](std::optional<Tensor>*) {
    for (const TensorView& t : tensors) {
      absl::Status s = runtime.gpu().Run(
          "allreduce", t, [&](Communicator& gpu) { return gpu.Allreduce(t, options); });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  return Submit(set, std::move(request), urgent);
}

absl::StatusOr<Handle> EnqueueBroadcast(Runtime& runtime, std::string name, TensorView inout,
                                        int root, bool urgent, int process_set_id) {
  const std::string label = absl::StrCat("broadcast '", name, "'");
  HVDD_RETURN_IF_ERROR(CheckName("broadcast", name));
  HVDD_RETURN_IF_ERROR(CheckTensors(label, {inout}));
  const int size = runtime.assignment().size;
  if (root < 0 || (size > 0 && root >= size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is out of range for ", size, " ranks"));
  }
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(process_set_id));
  HVDD_RETURN_IF_ERROR(CheckGpuSet(label, inout, set.id));
  // The root is a rank of the job (as in Horovod); on the set's ring it is
  // its place among the set's ranks.
  auto root_in_set = std::find(set.ranks.begin(), set.ranks.end(), root);
  if (root_in_set == set.ranks.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is not a member of process set ", set.id));
  }
  Request request;
  request.name = std::move(name);
  request.tensors = {inout};
  request.root = static_cast<int>(root_in_set - set.ranks.begin());
  request.kind = RequestKind::kBroadcast;
  if (OnCuda(inout)) {
    request.kind = RequestKind::kOpaque;
    request.opaque_operation = "broadcast";
    request.run = [&runtime, inout, root](std::optional<Tensor>*) {
      return runtime.gpu().Run("broadcast", inout,
                               [&](Communicator& gpu) { return gpu.Broadcast(inout, root); });
    };
  }
  return Submit(set, std::move(request), urgent);
}

absl::StatusOr<Handle> EnqueueAllgather(Runtime& runtime, std::string name, TensorView input,
                                        bool urgent, int process_set_id) {
  const std::string label = absl::StrCat("allgather '", name, "'");
  HVDD_RETURN_IF_ERROR(CheckName("allgather", name));
  HVDD_RETURN_IF_ERROR(CheckTensors(label, {input}));
  HVDD_RETURN_IF_ERROR(NeedsDimension(label, input));
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(process_set_id));
  HVDD_RETURN_IF_ERROR(CheckGpuSet(label, input, set.id));
  Request request;
  request.name = std::move(name);
  request.tensors = {input};
  request.kind = RequestKind::kAllgather;
  request.produces_output = true;
  if (OnCuda(input)) {
    request.kind = RequestKind::kOpaque;
    request.opaque_operation = "allgather";
    request.run = [&runtime, input](std::optional<Tensor>* output) {
      return runtime.gpu().Run("allgather", input, [&](Communicator& gpu) -> absl::Status {
        HVDD_ASSIGN_OR_RETURN(Tensor result, gpu.Allgather(input));
        *output = std::move(result);
        return absl::OkStatus();
      });
    };
  }
  return Submit(set, std::move(request), urgent);
}

absl::StatusOr<Handle> EnqueueReducescatter(Runtime& runtime, std::string name, TensorView input,
                                            const AllreduceOptions& options, bool urgent) {
  const std::string label = absl::StrCat("reducescatter '", name, "'");
  HVDD_RETURN_IF_ERROR(CheckName("reducescatter", name));
  HVDD_RETURN_IF_ERROR(CheckTensors(label, {input}));
  HVDD_RETURN_IF_ERROR(CheckReducible(label, input.dtype));
  HVDD_RETURN_IF_ERROR(NeedsDimension(label, input));
  HVDD_RETURN_IF_ERROR(CheckScaleFactors(label, options));
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(options.process_set_id));
  HVDD_RETURN_IF_ERROR(CheckGpuSet(label, input, set.id));
  Request request;
  request.name = std::move(name);
  request.tensors = {input};
  request.options = options;
  request.kind = RequestKind::kReducescatter;
  request.produces_output = true;
  if (OnCuda(input)) {
    request.kind = RequestKind::kOpaque;
    request.opaque_operation = "reducescatter";
    ReducescatterOptions scatter;
    scatter.op = options.op;
    scatter.prescale_factor = options.prescale_factor;
    scatter.postscale_factor = options.postscale_factor;
    request.run = [&runtime, input, scatter](std::optional<Tensor>* output) {
      return runtime.gpu().Run("reducescatter", input, [&](Communicator& gpu) -> absl::Status {
        HVDD_ASSIGN_OR_RETURN(Tensor result, gpu.Reducescatter(input, scatter));
        *output = std::move(result);
        return absl::OkStatus();
      });
    };
  }
  return Submit(set, std::move(request), urgent);
}

absl::StatusOr<Handle> EnqueueOpaque(Runtime& runtime, std::string name, std::string operation,
                                     std::vector<TensorView> tensors,
                                     std::function<absl::Status(std::optional<Tensor>*)> run,
                                     bool urgent, int process_set_id, bool produces_output) {
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(process_set_id));
  Request request;
  request.name = std::move(name);
  request.kind = RequestKind::kOpaque;
  request.produces_output = produces_output;
  request.opaque_operation = std::move(operation);
  request.tensors = std::move(tensors);
  request.run = std::move(run);
  return Submit(set, std::move(request), urgent);
}

absl::StatusOr<Handle> EnqueueJoin(Runtime& runtime) {
  HVDD_ASSIGN_OR_RETURN(const ProcessSetView set, runtime.ProcessSetFor(0));
  Request request;
  request.name = kJoinRequestName;
  request.kind = RequestKind::kJoin;
  request.produces_output = true;
  return Submit(set, std::move(request), /*urgent=*/true);
}

}  // namespace horovodd::internal

// ---------------------------------------------------------------------------
// async.h
// ---------------------------------------------------------------------------

namespace horovodd {
namespace {

using internal::CurrentRuntime;
using internal::Runtime;

absl::Status NotInitialized(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(what, " needs horovodd::Init() first"));
}

// A non-negative number from `name`, or `fallback` when it is unset.
absl::StatusOr<double> NumberEnv(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !(value >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a non-negative number, got '", text, "'"));
  }
  return value;
}

absl::Status CheckEngineOptions(const EngineOptions& options) {
  if (options.fusion_threshold_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the fusion threshold must not be negative, got ", options.fusion_threshold_bytes));
  }
  if (options.cycle_time <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("the cycle time must be positive, got ",
                                                   absl::FormatDuration(options.cycle_time)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptions::FromEnvironment() {
  EngineOptions options;
  HVDD_ASSIGN_OR_RETURN(
      double threshold,
      NumberEnv("HOROVOD_FUSION_THRESHOLD", static_cast<double>(options.fusion_threshold_bytes)));
  options.fusion_threshold_bytes = static_cast<int64_t>(threshold);
  HVDD_ASSIGN_OR_RETURN(double cycle_ms, NumberEnv("HOROVOD_CYCLE_TIME",
                                                   absl::ToDoubleMilliseconds(options.cycle_time)));
  if (cycle_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HOROVOD_CYCLE_TIME must be positive (milliseconds), got ", cycle_ms));
  }
  options.cycle_time = absl::Milliseconds(cycle_ms);
  return options;
}

absl::Status ConfigureEngine(const EngineOptions& options) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("ConfigureEngine");
  HVDD_RETURN_IF_ERROR(CheckEngineOptions(options));
  runtime->engine().set_options(options);
  return absl::OkStatus();
}

EngineOptions CurrentEngineOptions() {
  Runtime* runtime = CurrentRuntime();
  return runtime == nullptr ? EngineOptions{} : runtime->engine().options();
}

absl::StatusOr<Handle> AllreduceAsync(std::string name, TensorView inout,
                                      const AllreduceOptions& options) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("AllreduceAsync");
  return internal::EnqueueAllreduce(*runtime, std::move(name), {std::move(inout)}, options,
                                    /*urgent=*/false);
}

absl::StatusOr<Handle> GroupedAllreduceAsync(std::string name, std::vector<TensorView> inouts,
                                             const AllreduceOptions& options) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("GroupedAllreduceAsync");
  return internal::EnqueueAllreduce(*runtime, std::move(name), std::move(inouts), options,
                                    /*urgent=*/false);
}

absl::StatusOr<Handle> BroadcastAsync(std::string name, TensorView inout, int root,
                                      int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("BroadcastAsync");
  return internal::EnqueueBroadcast(*runtime, std::move(name), std::move(inout), root,
                                    /*urgent=*/false, process_set_id);
}

absl::StatusOr<Handle> AllgatherAsync(std::string name, TensorView input, int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("AllgatherAsync");
  return internal::EnqueueAllgather(*runtime, std::move(name), std::move(input),
                                    /*urgent=*/false, process_set_id);
}

absl::StatusOr<Handle> ReducescatterAsync(std::string name, TensorView input,
                                          const AllreduceOptions& options) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("ReducescatterAsync");
  return internal::EnqueueReducescatter(*runtime, std::move(name), std::move(input), options,
                                        /*urgent=*/false);
}

absl::StatusOr<int> AddProcessSet(std::vector<int> ranks, bool at_init) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("AddProcessSet");
  return runtime->AddProcessSet(std::move(ranks), at_init);
}

absl::Status RemoveProcessSet(int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("RemoveProcessSet");
  return runtime->RemoveProcessSet(process_set_id);
}

absl::StatusOr<std::vector<int>> ProcessSetRanks(int process_set_id) {
  Runtime* runtime = CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("ProcessSetRanks");
  return runtime->ProcessSetRanks(process_set_id);
}

std::vector<int> ProcessSetIds() {
  Runtime* runtime = CurrentRuntime();
  return runtime == nullptr ? std::vector<int>{} : runtime->ProcessSetIds();
}

}  // namespace horovodd
