// Choosing the GPU backend (HOROVOD_GPU_OPERATIONS), and what CUDA tensors
// get from the runtime's GPU collectives on a machine without a GPU (or in a
// build without CUDA). None of this needs a GPU.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "horovodd/device_tensor.h"
#include "scoped_env.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/gpu_operations.h"
#include "worker_runtime/kv_client/kv_store.h"
#include "worker_runtime/runtime/gpu_collectives.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::internal {
namespace {

using horovodd::testing::ScopedEnv;

TEST_CASE("HOROVOD_GPU_OPERATIONS picks nccl or gloo, in any case") {
  CHECK(*ParseGpuOperations("nccl", true) == GpuOperations::kNccl);
  CHECK(*ParseGpuOperations(" NCCL ", true) == GpuOperations::kNccl);
  CHECK(*ParseGpuOperations("gloo", true) == GpuOperations::kGloo);
  CHECK(*ParseGpuOperations("Gloo", false) == GpuOperations::kGloo);
}

TEST_CASE("unset HOROVOD_GPU_OPERATIONS means nccl when built with it, else gloo") {
  CHECK(*ParseGpuOperations("", true) == GpuOperations::kNccl);
  CHECK(*ParseGpuOperations("", false) == GpuOperations::kGloo);
  ScopedEnv unset("HOROVOD_GPU_OPERATIONS", nullptr);
  CHECK(*GpuOperationsFromEnvironment() ==
        (BuiltWithNccl() ? GpuOperations::kNccl : GpuOperations::kGloo));
}

TEST_CASE("a bad HOROVOD_GPU_OPERATIONS names the variable and the value") {
  absl::StatusOr<GpuOperations> mpi = ParseGpuOperations("mpi", true);
  REQUIRE(mpi.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(mpi.status().message()),
             Catch::Contains("HOROVOD_GPU_OPERATIONS must be nccl or gloo, got 'mpi'"));

  absl::StatusOr<GpuOperations> no_nccl = ParseGpuOperations("nccl", false);
  REQUIRE(no_nccl.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(no_nccl.status().message()),
             Catch::Contains("HOROVOD_GPU_OPERATIONS=nccl") && Catch::Contains("no NCCL"));
}

TEST_CASE("the runtime's options read HOROVOD_GPU_OPERATIONS") {
  ScopedEnv address("HOROVODD_DAEMON_ADDR", "127.0.0.1:1");
  ScopedEnv job("HOROVODD_JOB_ID", "job-1");
  ScopedEnv worker("HOROVODD_WORKER_ID", "0");
  SECTION("gloo") {
    ScopedEnv gpu("HOROVOD_GPU_OPERATIONS", "gloo");
    absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
    REQUIRE(options.ok());
    CHECK(options->gpu_operations == GpuOperations::kGloo);
  }
  SECTION("a bad value fails the whole environment") {
    ScopedEnv gpu("HOROVOD_GPU_OPERATIONS", "rccl");
    absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
    REQUIRE(options.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(options.status().message()), Catch::Contains("got 'rccl'"));
  }
}

// Records whether anything touched the generation's key-value namespace.
class CountingStore final : public KvStore {
 public:
  explicit CountingStore(int* calls) : calls_(calls) {}
  absl::Status Set(const std::string&, std::string) override {
    ++*calls_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>&,
                                               absl::Duration) override {
    ++*calls_;
    return absl::NotFoundError("empty");
  }
  absl::Status Wait(const std::vector<std::string>&, absl::Duration) override {
    ++*calls_;
    return absl::NotFoundError("empty");
  }

 private:
  int* calls_;
};

// A one-rank Gloo ring, for the staging path.
class OneRankRing {
 public:
  OneRankRing() {
    ConnectOptions options;
    options.timeout = absl::Seconds(30);
    absl::StatusOr<std::shared_ptr<GlooContext>> ring = ConnectGlooContext(store_, options);
    REQUIRE(ring.ok());
    ring_ = std::make_shared<GlooCommunicator>(*std::move(ring));
  }
  CommunicatorRunner runner() {
    return [this](CommunicatorOp op) {
      ++ops;
      return op(*ring_);
    };
  }
  int ops = 0;

 private:
  gloo::rendezvous::HashStore store_;
  std::shared_ptr<GlooCommunicator> ring_;
};

// The GPU collectives' ops, as the runtime runs them.
absl::Status Allreduce(GpuCollectives& gpu, const TensorView& t, const AllreduceOptions& o) {
  return gpu.Run("allreduce", t, [&](Communicator& c) { return c.Allreduce(t, o); });
}
absl::StatusOr<Tensor> Allgather(GpuCollectives& gpu, const TensorView& t) {
  absl::StatusOr<Tensor> result;
  absl::Status status = gpu.Run("allgather", t, [&](Communicator& c) {
    result = c.Allgather(t);
    return result.status();
  });
  if (!status.ok()) return status;
  return result;
}
absl::Status Broadcast(GpuCollectives& gpu, const TensorView& t, int root) {
  return gpu.Run("broadcast", t, [&](Communicator& c) { return c.Broadcast(t, root); });
}
absl::StatusOr<Tensor> Alltoall(GpuCollectives& gpu, const TensorView& t,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received) {
  absl::StatusOr<Tensor> result;
  absl::Status status = gpu.Run("alltoall", t, [&](Communicator& c) {
    result = c.Alltoall(t, splits, received);
    return result.status();
  });
  if (!status.ok()) return status;
  return result;
}
absl::StatusOr<Tensor> Reducescatter(GpuCollectives& gpu, const TensorView& t, ReduceOp op) {
  absl::StatusOr<Tensor> result;
  absl::Status status = gpu.Run("reducescatter", t, [&](Communicator& c) {
    result = c.Reducescatter(t, {op});
    return result.status();
  });
  if (!status.ok()) return status;
  return result;
}

TensorView CudaView(std::vector<float>& values) {
  TensorView view = ViewOf(values);
  view.device = Device{DeviceType::kCUDA, 0};
  return view;
}

// Without a GPU, the copy to host (staging) or the communicator (NCCL) says
// "no GPU"; in a build without CUDA every CUDA tensor is rejected up front.
void CheckNoGpuOutcome(const absl::Status& status) {
  INFO(status.ToString());
  if (!BuiltWithCuda()) {
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(status.message()), Catch::Contains("no CUDA support"));
  } else {
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(status.message()), Catch::Contains("no GPU"));
  }
}

bool MachineHasGpu() { return CudaDeviceCount().ok(); }

TEST_CASE("GPU collectives before any generation fail without touching CUDA") {
  OneRankRing ring;
  GpuCollectivesOptions options;
  options.cpu = ring.runner();
  GpuCollectives gpu(options);
  std::vector<float> values{1, 2};
  absl::Status status = Allreduce(gpu, CudaView(values), AllreduceOptions{});
  if (BuiltWithCuda()) {
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(status.message()),
               Catch::Contains("not a member of any generation yet"));
  } else {
    CheckNoGpuOutcome(status);
  }
  CHECK(ring.ops == 0);
}

TEST_CASE("an aborted generation's GPU collectives are ABORTED before they start") {
  if (!BuiltWithCuda()) return;  // every CUDA tensor is INVALID_ARGUMENT there (above)
  OneRankRing ring;
  int store_calls = 0;
  GpuCollectivesOptions options;
  options.operations = BuiltWithNccl() ? GpuOperations::kNccl : GpuOperations::kGloo;
  options.cpu = ring.runner();
  GpuCollectives gpu(options);
  gpu.EnterGeneration(4, 0, 1, ShrinkPlan(), std::make_unique<CountingStore>(&store_calls));
  gpu.Abort(5);
  std::vector<float> values{1, 2};
  absl::Status status = Allreduce(gpu, CudaView(values), AllreduceOptions{});
  CHECK(status.code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(status.message()),
             Catch::Contains("the daemon aborted generation 4 (generation 5 replaces it)"));
  absl::StatusOr<Tensor> gathered = Allgather(gpu, CudaView(values));
  CHECK(gathered.status().code() == absl::StatusCode::kAborted);
  CHECK(ring.ops == 0);
  CHECK(store_calls == 0);
}

TEST_CASE("an abort for the worker's own or an older generation changes nothing") {
  if (!BuiltWithCuda()) return;
  OneRankRing ring;
  GpuCollectivesOptions options;
  options.operations = GpuOperations::kGloo;
  options.cpu = ring.runner();
  GpuCollectives gpu(options);
  int store_calls = 0;
  gpu.EnterGeneration(4, 0, 1, ShrinkPlan(), std::make_unique<CountingStore>(&store_calls));
  gpu.Abort(3);
  gpu.Abort(4);
  std::vector<float> values{1, 2};
  absl::Status status = Allreduce(gpu, CudaView(values), AllreduceOptions{});
  CHECK(status.code() != absl::StatusCode::kAborted);
}

TEST_CASE("a GPU tensor without data is rejected before staging") {
  OneRankRing ring;
  GpuCollectivesOptions options;
  options.operations = GpuOperations::kGloo;
  options.cpu = ring.runner();
  GpuCollectives gpu(options);
  int store_calls = 0;
  gpu.EnterGeneration(1, 0, 1, ShrinkPlan(), std::make_unique<CountingStore>(&store_calls));
  TensorView empty{nullptr, DType::kFloat32, {3}, Device{DeviceType::kCUDA, 0}};
  absl::Status status = Broadcast(gpu, empty, 0);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  if (BuiltWithCuda()) {
    CHECK_THAT(std::string(status.message()),
               Catch::Contains("broadcast: tensor data is null but shape [3] has 3 elements"));
  }
  CHECK(ring.ops == 0);
}

TEST_CASE("without a GPU, CUDA tensors fail with 'no GPU' on both backends") {
  if (MachineHasGpu()) {
    WARN("this machine has a GPU: the no-GPU outcomes are not reachable here");
    return;
  }
  OneRankRing ring;
  std::vector<GpuOperations> backends{GpuOperations::kGloo};
  if (BuiltWithNccl()) backends.push_back(GpuOperations::kNccl);
  for (GpuOperations backend : backends) {
    INFO("HOROVOD_GPU_OPERATIONS=" << GpuOperationsName(backend));
    GpuCollectivesOptions options;
    options.operations = backend;
    options.cpu = ring.runner();
    GpuCollectives gpu(options);
    int store_calls = 0;
    gpu.EnterGeneration(1, 0, 1, ShrinkPlan(), std::make_unique<CountingStore>(&store_calls));
    std::vector<float> values{1, 2, 3, 4};
    CheckNoGpuOutcome(Allreduce(gpu, CudaView(values), AllreduceOptions{}));
    CheckNoGpuOutcome(Allgather(gpu, CudaView(values)).status());
    CheckNoGpuOutcome(Broadcast(gpu, CudaView(values), 0));
    CheckNoGpuOutcome(Alltoall(gpu, CudaView(values), {}, nullptr).status());
    CheckNoGpuOutcome(Reducescatter(gpu, CudaView(values), ReduceOp::kSum).status());
    // Nothing reached the ring or the generation's key-value namespace.
    CHECK(ring.ops == 0);
    CHECK(store_calls == 0);
  }
}

TEST_CASE("DeviceTensor without a GPU says why") {
  if (MachineHasGpu()) {
    WARN("this machine has a GPU: the no-GPU outcomes are not reachable here");
    return;
  }
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::Create(0, DType::kFloat64, {4});
  REQUIRE(tensor.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(tensor.status().message()), Catch::StartsWith("no GPU: "));
  absl::StatusOr<DeviceTensor> negative = DeviceTensor::Create(0, DType::kFloat64, {2, -1});
  REQUIRE(negative.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(negative.status().message()),
             Catch::Contains("negative dimension at index 1"));
}

}  // namespace
}  // namespace horovodd::internal
