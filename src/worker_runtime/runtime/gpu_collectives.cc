#include "worker_runtime/runtime/gpu_collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/gpu_staging.h"
#if HVDD_HAVE_NCCL
#include "worker_runtime/nccl/nccl_backend.h"
#endif

namespace horovodd::internal {

GpuCollectives::GpuCollectives(GpuCollectivesOptions options) : options_(std::move(options)) {}

GpuCollectives::~GpuCollectives() { LeaveGeneration(); }

std::unique_ptr<GpuBackend> GpuCollectives::MakeBackend(int64_t generation, int rank, int size,
                                                        ShrinkPlan shrink,
                                                        std::unique_ptr<KvStore> store) {
#if HVDD_HAVE_NCCL
  if (options_.operations == GpuOperations::kNccl) {
    NcclBackendOptions nccl;
    nccl.generation = generation;
    nccl.rank = rank;
    nccl.size = size;
    nccl.timeout = options_.timeout;
    nccl.store = std::move(store);
    nccl.should_abort = [this, generation] { return aborted_generation_.load() > generation; };
    nccl.shrink = std::move(shrink);
    nccl.seed = std::move(seed_);
    nccl.ring = options_.ring;
    return MakeNcclBackend(std::move(nccl));
  }
#endif
  (void)shrink;
  seed_.reset();
  return MakeStagedBackend(options_.ring);
}

void GpuCollectives::EnterGeneration(int64_t generation, int rank, int size,
                                     ShrinkPlan shrink,
                                     std::unique_ptr<KvStore> store) {
  LeaveGeneration();
  generation_ = generation;
  backend_ = MakeBackend(generation, rank, size, std::move(shrink), std::move(store));
}

void GpuCollectives::LeaveGeneration() {
  if (backend_ != nullptr) {
    std::unique_ptr<GpuBackendSeed> seed = backend_->TakeSeed();
    // A generation that made no communicator leaves the older seed in place.
    if (seed != nullptr) seed_ = std::move(seed);
  }
  backend_.reset();
  generation_ = 0;
}

void GpuCollectives::Abort(int64_t generation) {
  int64_t aborted = aborted_generation_.load();
  while (generation > aborted && !aborted_generation_.compare_exchange_weak(aborted, generation)) {
  }
}

bool GpuCollectives::Superseded() const { return aborted_generation_.load() > generation_; }

absl::StatusOr<GpuBackend*> GpuCollectives::Backend(const std::string& label,
                                                    const TensorView& tensor) const {
  if (!BuiltWithCuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": tensor is on CUDA device ", tensor.device.index,
        " but this build of horovodd has no CUDA support (the CUDA toolkit was not found when "
        "it was built)"));
  }
  if (backend_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": this worker is not a member of any generation yet"));
  }
  if (Superseded()) return SupersededError(absl::OkStatus());
  return backend_.get();
}

absl::Status GpuCollectives::SupersededError(const absl::Status& cause) const {
  std::string message = absl::StrCat("the daemon aborted generation ", generation_,
                                     " (generation ", aborted_generation_.load(),
                                     " replaces it)");
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

absl::Status GpuCollectives::Allreduce(TensorView inout, const AllreduceOptions& options) {
  HVDD_ASSIGN_OR_RETURN(GpuBackend* backend, Backend("allreduce", inout));
  return Outcome(backend->Allreduce(inout, options));
}

absl::StatusOr<Tensor> GpuCollectives::Allgather(const TensorView& input) {
  HVDD_ASSIGN_OR_RETURN(GpuBackend* backend, Backend("allgather", input));
  HVDD_ASSIGN_OR_RETURN(Tensor result, backend->Allgather(input), Outcome(_.status()));
  return result;
}

absl::Status GpuCollectives::Broadcast(TensorView inout, int root) {
  HVDD_ASSIGN_OR_RETURN(GpuBackend* backend, Backend("broadcast", inout));
  return Outcome(backend->Broadcast(inout, root));
}

absl::StatusOr<Tensor> GpuCollectives::Alltoall(const TensorView& input,
                                                const std::vector<int64_t>& splits,
                                                std::vector<int64_t>* received_splits) {
  HVDD_ASSIGN_OR_RETURN(GpuBackend* backend, Backend("alltoall", input));
  HVDD_ASSIGN_OR_RETURN(Tensor result, backend->Alltoall(input, splits, received_splits),
                        Outcome(_.status()));
  return result;
}

absl::StatusOr<Tensor> GpuCollectives::Reducescatter(const TensorView& input, ReduceOp op) {
  HVDD_ASSIGN_OR_RETURN(GpuBackend* backend, Backend("reducescatter", input));
  HVDD_ASSIGN_OR_RETURN(Tensor result, backend->Reducescatter(input, op), Outcome(_.status()));
  return result;
}

}  // namespace horovodd::internal
