#include "worker_runtime/runtime/gpu_collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/gpu_staging.h"
#if HVDD_HAVE_NCCL
#include "worker_runtime/nccl/nccl_communicator.h"
#endif

namespace horovodd::internal {

GpuCollectives::GpuCollectives(GpuCollectivesOptions options) : options_(std::move(options)) {}

GpuCollectives::~GpuCollectives() { LeaveGeneration(); }

std::unique_ptr<GpuCommunicator> GpuCollectives::MakeCommunicator(int64_t generation, int rank,
                                                                  int size, ShrinkPlan shrink,
                                                                  std::unique_ptr<KvStore> store) {
#if HVDD_HAVE_NCCL
  if (options_.operations == GpuOperations::kNccl) {
    NcclCommunicatorOptions nccl;
    nccl.generation = generation;
    nccl.rank = rank;
    nccl.size = size;
    nccl.timeout = options_.timeout;
    nccl.store = std::move(store);
    nccl.should_abort = [this, generation] { return aborted_generation_.load() > generation; };
    nccl.shrink = std::move(shrink);
    nccl.seed = std::move(seed_);
    nccl.cpu = options_.cpu;
    return MakeNcclCommunicator(std::move(nccl));
  }
#endif
  (void)generation;
  (void)shrink;
  (void)store;
  seed_.reset();
  return MakeStagedCommunicator(options_.cpu, rank, size);
}

void GpuCollectives::EnterGeneration(int64_t generation, int rank, int size, ShrinkPlan shrink,
                                     std::unique_ptr<KvStore> store) {
  LeaveGeneration();
  generation_ = generation;
  comm_ = MakeCommunicator(generation, rank, size, std::move(shrink), std::move(store));
}

void GpuCollectives::LeaveGeneration() {
  if (comm_ != nullptr) {
    std::unique_ptr<GpuSeed> seed = comm_->TakeSeed();
    // A generation that made no communicator leaves the older seed in place.
    if (seed != nullptr) seed_ = std::move(seed);
  }
  comm_.reset();
  generation_ = 0;
}

void GpuCollectives::Abort(int64_t generation) {
  int64_t aborted = aborted_generation_.load();
  while (generation > aborted && !aborted_generation_.compare_exchange_weak(aborted, generation)) {
  }
}

bool GpuCollectives::Superseded() const { return aborted_generation_.load() > generation_; }

absl::StatusOr<GpuCommunicator*> GpuCollectives::Current(const char* operation,
                                                         const TensorView& tensor) const {
  if (!BuiltWithCuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, ": tensor is on CUDA device ", tensor.device.index,
        " but this build of horovodd has no CUDA support (the CUDA toolkit was not found when "
        "it was built)"));
  }
  if (comm_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(operation, ": this worker is not a member of any generation yet"));
  }
  if (Superseded()) return SupersededError(absl::OkStatus());
  return comm_.get();
}

absl::Status GpuCollectives::SupersededError(const absl::Status& cause) const {
  std::string message = absl::StrCat("the daemon aborted generation ", generation_, " (generation ",
                                     aborted_generation_.load(), " replaces it)");
  if (!cause.ok()) absl::StrAppend(&message, " (", cause.message(), ")");
  return absl::AbortedError(message);
}

absl::Status GpuCollectives::Outcome(const absl::Status& status) const {
  if (status.ok()) return status;
  if (Superseded()) return SupersededError(status);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::UnavailableError(
        absl::StrCat("a peer stayed silent past the ring timeout: ", status.message()));
  }
  return status;
}

absl::Status GpuCollectives::Run(const char* operation, const TensorView& tensor,
                                 CommunicatorOp op) {
  HVDD_ASSIGN_OR_RETURN(GpuCommunicator* comm, Current(operation, tensor));
  return Outcome(op(*comm));
}

}  // namespace horovodd::internal
