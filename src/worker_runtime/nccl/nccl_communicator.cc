#include "worker_runtime/nccl/nccl_communicator.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/nccl/nccl_comm.h"
#include "worker_runtime/nccl/nccl_ops.h"

namespace horovodd::internal {
namespace {

absl::StatusOr<Tensor> ToHost(absl::StatusOr<DeviceTensor> result) {
  if (!result.ok()) return result.status();
  return result->ToHost();
}

// A generation's healthy communicator, kept for a later generation to shrink.
struct NcclSeed final : GpuSeed {
  std::unique_ptr<NcclComm> comm;
  int64_t generation = 0;
};

class NcclCommunicator final : public GpuCommunicator {
 public:
  explicit NcclCommunicator(NcclCommunicatorOptions options)
      : options_(std::move(options)),
        should_abort_([aborted = aborted_, outer = options_.should_abort] {
          return aborted->load() || (outer && outer());
        }) {}

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override {
    HVDD_ASSIGN_OR_RETURN(NcclComm* const comm, Comm(inout));
    return internal::Allreduce(*comm, inout, options);
  }

  absl::StatusOr<Tensor> Allgather(const TensorView& input) override {
    HVDD_ASSIGN_OR_RETURN(NcclComm* const comm, Comm(input));
    return ToHost(internal::Allgather(*comm, input));
  }

  absl::Status Broadcast(TensorView inout, int root) override {
    HVDD_ASSIGN_OR_RETURN(NcclComm* const comm, Comm(inout));
    return internal::Broadcast(*comm, inout, root);
  }

  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits) override {
    HVDD_ASSIGN_OR_RETURN(NcclComm* const comm, Comm(input));
    return ToHost(internal::Alltoall(*comm, input, splits, received_splits));
  }

  absl::StatusOr<Tensor> Reducescatter(const TensorView& input,
                                       const ReducescatterOptions& options) override {
    HVDD_ASSIGN_OR_RETURN(NcclComm* const comm, Comm(input));
    return ToHost(internal::Reducescatter(*comm, input, options));
  }

  absl::Status Adasum(TensorView, double, double) override {
    return absl::InvalidArgumentError("Adasum in the engine takes CPU tensors only");
  }

  // On the generation's CPU communicator: the ranks are the same.
  absl::Status Barrier() override {
    if (!options_.cpu) {
      return absl::FailedPreconditionError("the NCCL communicator has no CPU communicator");
    }
    return options_.cpu([](Communicator& cpu) { return cpu.Barrier(); });
  }

  // Only the thread running ops may touch NCCL: it sees the abort at its
  // next poll (should_abort).
  void Abort() override { aborted_->store(true); }
  absl::Status health() const override { return comm_ != nullptr ? comm_->health() : failure_; }

  std::unique_ptr<GpuSeed> TakeSeed() override {
    if (comm_ == nullptr || !comm_->health().ok()) return nullptr;
    auto seed = std::make_unique<NcclSeed>();
    seed->comm = std::move(comm_);
    seed->generation = options_.generation;
    return seed;
  }

 private:
  std::string CommName() const {
    return absl::StrCat("generation ", options_.generation, "'s NCCL communicator");
  }

  // The generation's communicator, made on the first op's device.
  absl::StatusOr<NcclComm*> Comm(const TensorView& tensor) {
    if (comm_ != nullptr) return comm_.get();
    if (!failure_.ok()) return failure_;
    if (absl::Status device = CheckCudaDevice(tensor.device.index); !device.ok()) return device;
    absl::StatusOr<std::unique_ptr<NcclComm>> comm = ShrinkSeed(tensor.device.index);
    if (comm.ok() && *comm == nullptr) comm = CreateComm(tensor.device.index);
    if (!comm.ok()) {
      failure_ = comm.status();
      return failure_;
    }
    comm_ = *std::move(comm);
    return comm_.get();
  }

  absl::StatusOr<std::unique_ptr<NcclComm>> CreateComm(int device) {
    NcclCommOptions comm_options;
    comm_options.rank = options_.rank;
    comm_options.size = options_.size;
    comm_options.device = device;
    comm_options.timeout = options_.timeout;
    comm_options.should_abort = should_abort_;
    comm_options.name = CommName();
    return NcclComm::Create(std::move(comm_options), *options_.store);
  }

  // The previous generation's communicator shrunk to this one, or null when
  // it cannot be (then the caller creates one). The seed is used at most once
  // and dropped either way. Every rank runs this at the generation's first
  // GPU op, so the agreement below is a collective like the op itself.
  absl::StatusOr<std::unique_ptr<NcclComm>> ShrinkSeed(int device) {
    std::unique_ptr<GpuSeed> seed = std::move(options_.seed);
#if HVDD_NCCL_HAS_SHRINK
    if (!options_.cpu) return nullptr;
    auto* parent = dynamic_cast<NcclSeed*>(seed.get());
    // A parent whose generation the daemon aborted lost a peer rather than
    // shed it: its next poll would abort it, so it is not shrunk.
    const bool usable = parent != nullptr && options_.shrink.from_generation != 0 &&
                        parent->generation == options_.shrink.from_generation &&
                        parent->comm->health().ok() && !parent->comm->abort_requested() &&
                        parent->comm->device() == device;
    // Shrinking is collective: one rank without a usable parent (it made no
    // communicator then, its communicator failed, it saw an abort) means all
    // create.
    int32_t can_shrink = usable ? 1 : 0;
    TensorView flag;
    flag.data = &can_shrink;
    flag.dtype = DType::kInt32;
    AllreduceOptions min;
    min.op = ReduceOp::kMin;
    min.name = "agree on shrinking the NCCL communicator";
    HVDD_RETURN_IF_ERROR(options_.cpu([&](Communicator& cpu) { return cpu.Allreduce(flag, min); }));
    if (can_shrink == 0) return nullptr;
    absl::StatusOr<std::unique_ptr<NcclComm>> child =
        parent->comm->Shrink(options_.shrink.excluded_ranks, should_abort_, CommName());
    if (child.ok() && (*child)->rank() != options_.rank) {
      return absl::InternalError(absl::StrCat("shrinking into ", CommName(), " gave rank ",
                                              (*child)->rank(), ", the daemon assigned ",
                                              options_.rank));
    }
    return child;
#else
    (void)device;
    return nullptr;
#endif
  }

  NcclCommunicatorOptions options_;
  // Set by Abort(); shared with the communicators made here, which may
  // outlive this one as a seed.
  const std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
  const std::function<bool()> should_abort_;  // aborted_ or options_.should_abort()
  std::unique_ptr<NcclComm> comm_;            // null until the first op
  absl::Status failure_;                      // why making comm_ failed
};

}  // namespace

std::unique_ptr<GpuCommunicator> MakeNcclCommunicator(NcclCommunicatorOptions options) {
  return std::make_unique<NcclCommunicator>(std::move(options));
}

}  // namespace horovodd::internal
