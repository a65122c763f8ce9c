// How CUDA and NCCL failures become Status codes, and the NCCL communicator's
// argument checks, none of which needs a GPU. Built with NCCL only.
#include <string>

#include <catch2/catch.hpp>

#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/cuda_status.h"
#include "worker_runtime/nccl/nccl_comm.h"
#include "worker_runtime/nccl/nccl_status.h"

namespace horovodd::internal {
namespace {

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("NCCL results map to the codes the elastic loop acts on") {
  CHECK(NcclStatus(ncclSuccess, "allreduce").ok());
  // A lost peer or a broken network is a collective failure: reset.
  CHECK(NcclStatus(ncclRemoteError, "allreduce").code() == absl::StatusCode::kUnavailable);
  CHECK(NcclStatus(ncclSystemError, "allreduce").code() == absl::StatusCode::kUnavailable);
  // Bad calls are the caller's to fix.
  CHECK(NcclStatus(ncclInvalidArgument, "allreduce").code() == absl::StatusCode::kInvalidArgument);
  CHECK(NcclStatus(ncclInvalidUsage, "allreduce").code() == absl::StatusCode::kInvalidArgument);
  // CUDA inside NCCL, NCCL bugs, and a call still in progress are internal.
  CHECK(NcclStatus(ncclUnhandledCudaError, "allreduce").code() == absl::StatusCode::kInternal);
  CHECK(NcclStatus(ncclInternalError, "allreduce").code() == absl::StatusCode::kInternal);
  CHECK(NcclStatus(ncclInProgress, "allreduce").code() == absl::StatusCode::kInternal);
}

TEST_CASE("NCCL error messages say what failed, NCCL's words and the detail") {
  absl::Status status =
      NcclStatus(ncclRemoteError, "allreduce 'grads'", "peer 10.0.0.2 closed the connection");
  CHECK_THAT(Message(status), Catch::StartsWith("allreduce 'grads': NCCL error 6, ") &&
                                  Catch::Contains(ncclGetErrorString(ncclRemoteError)) &&
                                  Catch::EndsWith(": peer 10.0.0.2 closed the connection"));
}

TEST_CASE("CUDA errors map to codes and keep CUDA's name for the error") {
  CHECK(CudaStatus(cudaSuccess, "cudaMemcpy").ok());
  absl::Status no_device = CudaStatus(cudaErrorNoDevice, "cudaSetDevice(0)");
  CHECK(no_device.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(no_device), Catch::StartsWith("cudaSetDevice(0): cudaErrorNoDevice ("));
  CHECK(CudaStatus(cudaErrorInsufficientDriver, "x").code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(CudaStatus(cudaErrorInvalidDevice, "x").code() == absl::StatusCode::kInvalidArgument);
  CHECK(CudaStatus(cudaErrorInvalidValue, "x").code() == absl::StatusCode::kInvalidArgument);
  CHECK(CudaStatus(cudaErrorMemoryAllocation, "x").code() == absl::StatusCode::kResourceExhausted);
  CHECK(CudaStatus(cudaErrorIllegalAddress, "x").code() == absl::StatusCode::kInternal);
  CHECK(CudaStatus(cudaErrorLaunchFailure, "x").code() == absl::StatusCode::kInternal);
}

// A store nothing may touch: bad arguments are caught before the exchange.
class UntouchableStore final : public KvStore {
 public:
  absl::Status Set(const std::string& key, std::string) override {
    FAIL("Set(" << key << ") called");
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration) override {
    FAIL("Get(" << keys.front() << ") called");
    return std::vector<std::string>();
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration) override {
    FAIL("Wait(" << keys.front() << ") called");
    return absl::OkStatus();
  }
};

TEST_CASE("an NCCL communicator with a bad rank, size or timeout is refused up front") {
  UntouchableStore store;
  NcclCommOptions options;
  options.name = "generation 7's NCCL communicator";
  SECTION("rank past the size") {
    options.rank = 2;
    options.size = 2;
    absl::StatusOr<std::unique_ptr<NcclComm>> comm = NcclComm::Create(options, store);
    REQUIRE(comm.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(
        Message(comm.status()),
        Catch::Equals("generation 7's NCCL communicator: rank 2 is out of range for size 2"));
  }
  SECTION("no ranks") {
    options.size = 0;
    CHECK(NcclComm::Create(options, store).status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("zero timeout") {
    options.timeout = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<NcclComm>> comm = NcclComm::Create(options, store);
    REQUIRE(comm.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(Message(comm.status()), Catch::Contains("timeout must be positive"));
  }
}

TEST_CASE("without a GPU an NCCL communicator is never started") {
  if (CudaDeviceCount().ok()) {
    WARN("this machine has a GPU: the no-GPU outcome is not reachable here");
    return;
  }
  UntouchableStore store;
  absl::StatusOr<std::unique_ptr<NcclComm>> comm = NcclComm::Create(NcclCommOptions{}, store);
  REQUIRE(comm.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(comm.status()), Catch::StartsWith("no GPU: "));
}

}  // namespace
}  // namespace horovodd::internal
