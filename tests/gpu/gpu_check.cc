// The GPU check: runs the NCCL communicator on a machine with a GPU, as one rank
// (NCCL refuses two ranks on one device), and prints one line per check:
//   PASS <check> / FAIL <check>: <why> / SKIP <check>: <why>
//   TIMING <name> n=<count> median_ms=<m> p90_ms=<p>
//   SUMMARY <section> passed=<p> failed=<f>
// Exits 1 if any check failed, 2 without a GPU. Sections (one per process,
// so a broken CUDA context cannot spill into the next one):
//   collectives   every op and dtype on NCCL against values computed on the
//                 CPU, errors, and the runtime's dispatch (NCCL and staging)
//   cycles [N]    N create/allreduce/abort cycles of a communicator, then N
//                 shrink (split) cycles from one parent: median and p90
//   abort         an op stuck behind the caller's stream is aborted by
//                 should_abort(), and a new communicator works afterwards
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/hash_store.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "horovodd/device_tensor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/cuda_status.h"
#include "worker_runtime/kv_client/in_memory_kv_store.h"
#include "worker_runtime/nccl/nccl_comm.h"
#include "worker_runtime/nccl/nccl_ops.h"
#include "worker_runtime/runtime/gpu_collectives.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/float16.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

int g_passed = 0;
int g_failed = 0;

void Report(const std::string& check, const absl::Status& status) {
  if (status.ok()) {
    ++g_passed;
    std::printf("PASS %s\n", check.c_str());
  } else {
    ++g_failed;
    std::printf("FAIL %s: %s\n", check.c_str(), status.ToString().c_str());
  }
  std::fflush(stdout);
}

int Summary(const char* section) {
  std::printf("SUMMARY %s passed=%d failed=%d\n", section, g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}

absl::StatusOr<std::unique_ptr<NcclComm>> OneRankComm(std::function<bool()> should_abort = {}) {
  InMemoryKvStore store;
  NcclCommOptions options;
  options.timeout = absl::Seconds(60);
  options.should_abort = std::move(should_abort);
  return NcclComm::Create(options, store);
}

// Small integers, exact in every dtype (uint8 stays non-negative).
Tensor Pattern(DType dtype, std::vector<int64_t> shape, int offset = 0) {
  Tensor tensor(dtype, std::move(shape));
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    const int v = static_cast<int>((i + offset) % 7) - (dtype == DType::kUInt8 ? 0 : 3);
    switch (dtype) {
      case DType::kUInt8:
        tensor.data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DType::kInt32:
        tensor.data_as<int32_t>()[i] = v;
        break;
      case DType::kInt64:
        tensor.data_as<int64_t>()[i] = v;
        break;
      case DType::kFloat16:
        tensor.data_as<uint16_t>()[i] = FloatToHalf(static_cast<float>(v));
        break;
      case DType::kFloat32:
        tensor.data_as<float>()[i] = static_cast<float>(v);
        break;
      case DType::kFloat64:
        tensor.data_as<double>()[i] = v;
        break;
      default:
        std::fprintf(stderr, "gpu_check: no test pattern for dtype %d\n", static_cast<int>(dtype));
        std::abort();
    }
  }
  return tensor;
}

// What one rank's reduction gives on the CPU path (reduce_kernels.h).
Tensor Expected(const Tensor& input, ReduceOp op, double prescale, double postscale) {
  Tensor expected = input;
  if (prescale != 1.0) ScaleInPlace(expected.dtype(), expected.data(), expected.numel(), prescale);
  FinishReduction(expected.dtype(), op, expected.data(), expected.numel(), 1, postscale);
  return expected;
}

absl::Status SameBytes(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) {
    return absl::InternalError(
        absl::StrCat("shape ", ShapeString(got.shape()), ", expected ", ShapeString(want.shape())));
  }
  if (std::memcmp(got.data(), want.data(), want.nbytes()) == 0) return absl::OkStatus();
  for (size_t i = 0; i < want.nbytes(); ++i) {
    const auto* g = static_cast<const unsigned char*>(got.data());
    const auto* w = static_cast<const unsigned char*>(want.data());
    if (g[i] != w[i]) {
      return absl::InternalError(absl::StrCat("first differing byte ", i, " of ", want.nbytes()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckResult(const absl::StatusOr<DeviceTensor>& got, const Tensor& want) {
  if (!got.ok()) return got.status();
  absl::StatusOr<Tensor> host = got->ToHost();
  if (!host.ok()) return host.status();
  return SameBytes(*host, want);
}

const DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                         DType::kFloat16, DType::kInt64,   DType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};

void CheckNcclOps(NcclComm& comm) {
  for (DType dtype : kDTypes) {
    const std::string type = DTypeName(dtype);
    for (ReduceOp op : kOps) {
      for (auto [pre, post] : {std::pair{1.0, 1.0}, std::pair{2.0, 0.5}}) {
        const Tensor input = Pattern(dtype, {1000});
        absl::StatusOr<DeviceTensor> tensor = DeviceTensor::FromHost(Tensor(input).view(), 0);
        AllreduceOptions options;
        options.op = op;
        options.prescale_factor = pre;
        options.postscale_factor = post;
        absl::Status status =
            tensor.ok() ? Allreduce(comm, tensor->view(), options) : tensor.status();
        if (status.ok()) status = CheckResult(std::move(tensor), Expected(input, op, pre, post));
        Report(
            absl::StrCat("allreduce ", type, " ", ReduceOpName(op), " pre ", pre, " post ", post),
            status);
      }
    }
    const Tensor matrix = Pattern(dtype, {5, 3}, 2);
    auto on_gpu = [&] { return DeviceTensor::FromHost(Tensor(matrix).view(), 0); };
    {
      absl::StatusOr<DeviceTensor> tensor = on_gpu();
      absl::Status status = tensor.ok() ? Broadcast(comm, tensor->view(), 0) : tensor.status();
      if (status.ok()) status = CheckResult(std::move(tensor), matrix);
      Report(absl::StrCat("broadcast ", type), status);
    }
    {
      absl::StatusOr<DeviceTensor> tensor = on_gpu();
      Report(absl::StrCat("allgather ", type),
             tensor.ok() ? CheckResult(Allgather(comm, tensor->view()), matrix) : tensor.status());
    }
    {
      absl::StatusOr<DeviceTensor> tensor = on_gpu();
      std::vector<int64_t> received;
      absl::Status status =
          tensor.ok() ? CheckResult(Alltoall(comm, tensor->view(), {5}, &received), matrix)
                      : tensor.status();
      if (status.ok() && received != std::vector<int64_t>{5}) {
        status = absl::InternalError("received splits are not {5}");
      }
      Report(absl::StrCat("alltoall ", type), status);
    }
    for (ReduceOp op : kOps) {
      absl::StatusOr<DeviceTensor> tensor = on_gpu();
      Report(absl::StrCat("reducescatter ", type, " ", ReduceOpName(op), " pre 2 post 0.5"),
             tensor.ok() ? CheckResult(Reducescatter(comm, tensor->view(), {op, 2.0, 0.5}),
                                       Expected(matrix, op, 2.0, 0.5))
                         : tensor.status());
    }
  }
  // Big enough for many blocks of the scaling kernel and NCCL channels.
  const Tensor big = Pattern(DType::kFloat32, {1 << 22});
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::FromHost(Tensor(big).view(), 0);
  AllreduceOptions average;
  average.prescale_factor = 0.25;
  absl::Status status = tensor.ok() ? Allreduce(comm, tensor->view(), average) : tensor.status();
  if (status.ok()) status = CheckResult(std::move(tensor), Expected(big, average.op, 0.25, 1.0));
  Report("allreduce float32 average of 4M elements", status);
}

void CheckNcclErrors(NcclComm& comm) {
  std::vector<float> host{1, 2};
  TensorView cpu = ViewOf(host);
  Report("a CPU tensor is INVALID_ARGUMENT",
         Allreduce(comm, cpu, {}).code() == absl::StatusCode::kInvalidArgument
             ? absl::OkStatus()
             : absl::InternalError("not INVALID_ARGUMENT"));
  TensorView elsewhere = cpu;
  elsewhere.device = Device{DeviceType::kCUDA, 7};
  absl::Status status = Allgather(comm, elsewhere).status();
  Report("a tensor on another device is INVALID_ARGUMENT naming both devices",
         status.code() == absl::StatusCode::kInvalidArgument &&
                 absl::StrContains(status.message(), "device 7") &&
                 absl::StrContains(status.message(), "device 0")
             ? absl::OkStatus()
             : absl::InternalError(status.ToString()));
  Report("the communicator is still healthy after bad arguments", comm.health());
}

// The runtime's path: GpuCollectives on NCCL, and staged through a one-rank
// Gloo ring, with results back in host memory.
void CheckDispatch() {
  gloo::rendezvous::HashStore hash_store;
  absl::StatusOr<std::shared_ptr<GlooContext>> context = ConnectGlooContext(hash_store, {});
  if (!context.ok()) {
    Report("one-rank Gloo ring for staging", context.status());
    return;
  }
  GlooCommunicator ring(*std::move(context));
  for (GpuOperations operations : {GpuOperations::kNccl, GpuOperations::kGloo}) {
    const std::string via = absl::StrCat("dispatch via ", GpuOperationsName(operations), ": ");
    GpuCollectivesOptions options;
    options.operations = operations;
    options.cpu = [&](CommunicatorOp op) { return op(ring); };
    GpuCollectives gpu(options);
    gpu.EnterGeneration(1, 0, 1, ShrinkPlan(), std::make_unique<InMemoryKvStore>());
    const Tensor input = Pattern(DType::kFloat64, {4, 2});
    absl::StatusOr<DeviceTensor> tensor = DeviceTensor::FromHost(Tensor(input).view(), 0);
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    sum.postscale_factor = 3;
    absl::Status status =
        tensor.ok() ? gpu.Run("allreduce", tensor->view(),
                              [&](Communicator& c) { return c.Allreduce(tensor->view(), sum); })
                    : tensor.status();
    if (status.ok()) status = CheckResult(std::move(tensor), Expected(input, sum.op, 1, 3));
    Report(via + "allreduce in place on the GPU", status);

    absl::StatusOr<DeviceTensor> source = DeviceTensor::FromHost(Tensor(input).view(), 0);
    if (!source.ok()) {
      Report(via + "copy to the GPU", source.status());
      continue;
    }
    absl::StatusOr<Tensor> gathered = absl::UnknownError("not run");
    if (absl::Status s = gpu.Run("allgather", source->view(),
                                 [&](Communicator& c) {
                                   gathered = c.Allgather(source->view());
                                   return gathered.status();
                                 });
        !s.ok()) {
      gathered = s;
    }
    Report(via + "allgather to host",
           gathered.ok() ? SameBytes(*gathered, input) : gathered.status());
    absl::StatusOr<Tensor> scattered = absl::UnknownError("not run");
    if (absl::Status s = gpu.Run("reducescatter", source->view(),
                                 [&](Communicator& c) {
                                   scattered =
                                       c.Reducescatter(source->view(), {ReduceOp::kAverage});
                                   return scattered.status();
                                 });
        !s.ok()) {
      scattered = s;
    }
    Report(via + "reducescatter to host",
           scattered.ok() ? SameBytes(*scattered, Expected(input, ReduceOp::kAverage, 1, 1))
                          : scattered.status());
    gpu.Abort(2);
    status = gpu.Run("broadcast", source->view(),
                     [&](Communicator& c) { return c.Broadcast(source->view(), 0); });
    Report(via + "ABORTED once the daemon superseded the generation",
           status.code() == absl::StatusCode::kAborted ? absl::OkStatus()
                                                       : absl::InternalError(status.ToString()));
  }
}

int RunCollectives() {
  absl::StatusOr<std::unique_ptr<NcclComm>> comm = OneRankComm();
  Report("create a one-rank NCCL communicator", comm.status());
  if (comm.ok()) {
    CheckNcclOps(**comm);
    CheckNcclErrors(**comm);
  }
  const Tensor nine = Pattern(DType::kInt64, {9});
  Report("DeviceTensor round trip",
         CheckResult(DeviceTensor::FromHost(Tensor(nine).view(), 0), nine));
  CheckDispatch();
  return Summary("collectives");
}

// ---------------------------------------------------------------------------
// cycles: what a reset costs
// ---------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void Timing(const std::string& name, std::vector<double> samples) {
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  const double median = samples[samples.size() / 2];
  const double p90 = samples[std::min(samples.size() - 1, samples.size() * 9 / 10)];
  std::printf("TIMING %s n=%zu median_ms=%.2f p90_ms=%.2f\n", name.c_str(), samples.size(), median,
              p90);
  std::fflush(stdout);
}

absl::Status OneAllreduce(NcclComm& comm, DeviceTensor& tensor) {
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  return Allreduce(comm, tensor.view(), sum);
}

int RunCycles(int count) {
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::Create(0, DType::kFloat32, {1 << 20});
  if (!tensor.ok()) {
    Report("a 4 MiB GPU tensor", tensor.status());
    return Summary("cycles");
  }
  std::vector<double> create_ms, op_ms, abort_ms, total_ms;
  absl::Status failure;
  for (int i = 0; i < count && failure.ok(); ++i) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<NcclComm>> comm = OneRankComm();
    if (!comm.ok()) {
      failure = comm.status();
      break;
    }
    create_ms.push_back(MillisSince(start));
    const Clock::time_point op_start = Clock::now();
    failure = OneAllreduce(**comm, *tensor);
    op_ms.push_back(MillisSince(op_start));
    const Clock::time_point abort_start = Clock::now();
    comm->reset();  // ncclCommAbort
    abort_ms.push_back(MillisSince(abort_start));
    total_ms.push_back(MillisSince(start));
  }
  Report(absl::StrCat(count, " create/allreduce/abort cycles"), failure);
  Timing("cycle.create", create_ms);
  Timing("cycle.allreduce_4MiB", op_ms);
  Timing("cycle.abort", abort_ms);
  Timing("cycle.total", total_ms);

#if HVDD_NCCL_HAS_SHRINK
  absl::StatusOr<std::unique_ptr<NcclComm>> parent = OneRankComm();
  Report("parent communicator for shrinking", parent.status());
  if (!parent.ok()) return Summary("cycles");
  absl::Status own = (*parent)->Shrink({0}, {}, "child").status();
  Report("shrinking away our own rank is INVALID_ARGUMENT",
         own.code() == absl::StatusCode::kInvalidArgument ? absl::OkStatus()
                                                          : absl::InternalError(own.ToString()));
  // One GPU holds one rank, and NCCL refuses to exclude none: an empty list
  // takes ncclCommSplit, the same child-communicator path inside NCCL.
  std::vector<double> shrink_ms, shrink_total_ms;
  failure = absl::OkStatus();
  for (int i = 0; i < count && failure.ok(); ++i) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<NcclComm>> child =
        (*parent)->Shrink({}, {}, absl::StrCat("child ", i));
    if (!child.ok()) {
      failure = child.status();
      break;
    }
    shrink_ms.push_back(MillisSince(start));
    failure = OneAllreduce(**child, *tensor);
    child->reset();
    shrink_total_ms.push_back(MillisSince(start));
  }
  Report(absl::StrCat(count, " shrink(split)/allreduce/abort cycles from one parent"), failure);
  Timing("shrink.create", shrink_ms);
  Timing("shrink.total", shrink_total_ms);
  if (!shrink_ms.empty() && !create_ms.empty()) {
    std::sort(shrink_ms.begin(), shrink_ms.end());
    std::sort(create_ms.begin(), create_ms.end());
    std::printf("TIMING ratio create/shrink median=%.2f\n",
                create_ms[create_ms.size() / 2] / shrink_ms[shrink_ms.size() / 2]);
  }
  Report("the parent still works after its children", OneAllreduce(**parent, *tensor));
#else
  std::printf("SKIP shrink: NCCL %d has no ncclCommShrink (2.27+)\n", NCCL_VERSION_CODE);
#endif
  return Summary("cycles");
}

// ---------------------------------------------------------------------------
// abort: an op that cannot finish is aborted from another thread's request
// ---------------------------------------------------------------------------

// A host function on the legacy default stream that holds the stream (and so
// the op that waits for it) until `release`, for 60 s at most.
void CUDART_CB HoldStream(void* release) {
  const Clock::time_point start = Clock::now();
  while (!static_cast<std::atomic<bool>*>(release)->load() &&
         Clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int RunAbort() {
  std::atomic<bool> abort{false};
  std::atomic<bool> release{false};
  std::atomic<bool> returned{false};
  absl::StatusOr<std::unique_ptr<NcclComm>> comm = OneRankComm([&] { return abort.load(); });
  Report("create a one-rank NCCL communicator", comm.status());
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::Create(0, DType::kFloat32, {1024});
  Report("a GPU tensor", tensor.status());
  if (!comm.ok() || !tensor.ok()) return Summary("abort");

  Report(
      "hold the default stream",
      CudaStatus(cudaLaunchHostFunc(cudaStreamLegacy, HoldStream, &release), "cudaLaunchHostFunc"));
  // The daemon's abort arrives 300 ms into the op; the stream is released 5 s
  // later whatever happened, so a stuck abort shows up as a time, not a hang.
  Clock::time_point abort_at;
  std::thread daemon([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    abort_at = Clock::now();
    abort = true;
    for (int i = 0; i < 5000 && !returned.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    release = true;
  });
  absl::Status status = OneAllreduce(**comm, *tensor);
  const Clock::time_point returned_at = Clock::now();
  returned = true;
  daemon.join();
  const double abort_ms = std::chrono::duration<double, std::milli>(returned_at - abort_at).count();
  Report("the op blocked in flight returns ABORTED", status.code() == absl::StatusCode::kAborted
                                                         ? absl::OkStatus()
                                                         : absl::InternalError(status.ToString()));
  std::printf("TIMING abort.in_flight_return n=1 median_ms=%.2f p90_ms=%.2f%s\n", abort_ms,
              abort_ms, abort_ms > 4000 ? " (ncclCommAbort waited for the held stream)" : "");
  status = OneAllreduce(**comm, *tensor);
  Report("later ops on the aborted communicator fail at once with ABORTED",
         status.code() == absl::StatusCode::kAborted ? absl::OkStatus()
                                                     : absl::InternalError(status.ToString()));
  comm->reset();
  Report("the GPU is idle again", CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  absl::StatusOr<std::unique_ptr<NcclComm>> fresh = OneRankComm();
  Report("a new communicator works after the abort",
         fresh.ok() ? OneAllreduce(**fresh, *tensor) : fresh.status());
  return Summary("abort");
}

}  // namespace
}  // namespace horovodd::internal

int main(int argc, char** argv) {
  using namespace horovodd::internal;
  const std::string section = argc > 1 ? argv[1] : "";
  absl::StatusOr<int> gpus = CudaDeviceCount();
  if (!gpus.ok()) {
    std::printf("SKIP %s: %s\n", section.c_str(), std::string(gpus.status().message()).c_str());
    return 2;
  }
  int version = 0;
  ncclGetVersion(&version);
  std::printf("INFO %d GPU(s), NCCL %d (built against %d), pid %d\n", *gpus, version,
              NCCL_VERSION_CODE, static_cast<int>(getpid()));
  if (section == "collectives") return RunCollectives();
  if (section == "cycles") return RunCycles(argc > 2 ? std::atoi(argv[2]) : 50);
  if (section == "abort") return RunAbort();
  std::fprintf(stderr, "usage: %s collectives | cycles [N] | abort\n", argv[0]);
  return 64;
}
