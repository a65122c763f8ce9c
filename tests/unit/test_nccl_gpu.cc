// The NCCL backend on a real GPU, one rank: its own executable, with its own
// main, so that without a GPU it says why and exits kSkipped, which ctest
// reports as skipped (SKIP_RETURN_CODE in tests/unit/CMakeLists.txt) rather
// than passed. tests/gpu/run.sh runs it, and the full GPU check (every op and
// dtype, abort/rebuild cycles, the elastic example), on a machine with one.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "horovodd/device_tensor.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/kv_client/in_memory_kv_store.h"
#include "worker_runtime/nccl/nccl_comm.h"
#include "worker_runtime/nccl/nccl_ops.h"

namespace horovodd::internal {
namespace {

std::unique_ptr<NcclComm> OneRankComm(InMemoryKvStore& store,
                                      std::function<bool()> should_abort = {}) {
  NcclCommOptions options;
  options.timeout = absl::Seconds(60);
  options.should_abort = std::move(should_abort);
  absl::StatusOr<std::unique_ptr<NcclComm>> comm = NcclComm::Create(options, store);
  INFO(comm.status().ToString());
  REQUIRE(comm.ok());
  return *std::move(comm);
}

template <typename T>
std::vector<T> Read(const DeviceTensor& tensor) {
  std::vector<T> host(static_cast<size_t>(tensor.numel()));
  REQUIRE(tensor.CopyToHost(ViewOf(host)).ok());
  return host;
}

TEST_CASE("one-rank NCCL allreduce scales and reduces on the GPU") {
  InMemoryKvStore store;
  std::unique_ptr<NcclComm> comm = OneRankComm(store);
  absl::StatusOr<std::string> id = GetKey(store, kNcclUniqueIdKey, absl::ZeroDuration());
  REQUIRE(id.ok());
  CHECK(id->size() == NCCL_UNIQUE_ID_BYTES);

  std::vector<float> values{1, -2, 3.5f};
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::FromHost(ViewOf(values), 0);
  REQUIRE(tensor.ok());
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  options.prescale_factor = 4;
  options.postscale_factor = 0.5;
  REQUIRE(Allreduce(*comm, tensor->view(), options).ok());
  CHECK(Read<float>(*tensor) == std::vector<float>{2, -4, 7});

  std::vector<int32_t> ints{7, -7};
  absl::StatusOr<DeviceTensor> int_tensor = DeviceTensor::FromHost(ViewOf(ints), 0);
  REQUIRE(int_tensor.ok());
  options.op = ReduceOp::kAverage;
  options.prescale_factor = 0.5;  // integers truncate toward zero, like the CPU path
  options.postscale_factor = 1;
  REQUIRE(Allreduce(*comm, int_tensor->view(), options).ok());
  CHECK(Read<int32_t>(*int_tensor) == std::vector<int32_t>{3, -3});
}

TEST_CASE("one-rank NCCL ops that size their output") {
  InMemoryKvStore store;
  std::unique_ptr<NcclComm> comm = OneRankComm(store);
  std::vector<double> values{1, 2, 3, 4, 5, 6};
  absl::StatusOr<DeviceTensor> input = DeviceTensor::FromHost(ViewOf(values), 0);
  REQUIRE(input.ok());
  TensorView matrix = input->view();
  matrix.shape = {3, 2};

  absl::StatusOr<DeviceTensor> gathered = Allgather(*comm, matrix);
  REQUIRE(gathered.ok());
  CHECK(gathered->shape() == std::vector<int64_t>{3, 2});
  CHECK(Read<double>(*gathered) == values);

  std::vector<int64_t> received;
  absl::StatusOr<DeviceTensor> exchanged = Alltoall(*comm, matrix, {3}, &received);
  REQUIRE(exchanged.ok());
  CHECK(received == std::vector<int64_t>{3});
  CHECK(Read<double>(*exchanged) == values);

  absl::StatusOr<DeviceTensor> scattered = Reducescatter(*comm, matrix, {ReduceOp::kMax, 2.0});
  REQUIRE(scattered.ok());
  CHECK(Read<double>(*scattered) == std::vector<double>{2, 4, 6, 8, 10, 12});

  absl::Status bad = Alltoall(*comm, matrix, {2}, nullptr).status();
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  // A bad argument leaves the communicator usable.
  CHECK(Broadcast(*comm, matrix, 0).ok());
}

TEST_CASE("an abort request makes the next NCCL op ABORTED, and every one after it") {
  InMemoryKvStore store;
  bool abort = false;
  std::unique_ptr<NcclComm> comm = OneRankComm(store, [&abort] { return abort; });
  std::vector<float> values{1};
  absl::StatusOr<DeviceTensor> tensor = DeviceTensor::FromHost(ViewOf(values), 0);
  REQUIRE(tensor.ok());
  REQUIRE(Allreduce(*comm, tensor->view(), AllreduceOptions{}).ok());
  abort = true;
  absl::Status aborted = Allreduce(*comm, tensor->view(), AllreduceOptions{});
  CHECK(aborted.code() == absl::StatusCode::kAborted);
  abort = false;
  CHECK(Broadcast(*comm, tensor->view(), 0).code() == absl::StatusCode::kAborted);
  CHECK(comm->health().code() == absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace horovodd::internal

// The exit code ctest reads as "skipped" (autotools' convention).
constexpr int kSkipped = 77;

int main(int argc, char** argv) {
  absl::StatusOr<int> count = horovodd::internal::CudaDeviceCount();
  if (!count.ok()) {
    std::printf("skipped: %s\n", std::string(count.status().message()).c_str());
    return kSkipped;
  }
  return Catch::Session().run(argc, argv);
}
