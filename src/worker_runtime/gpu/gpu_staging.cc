#include "worker_runtime/gpu/gpu_staging.h"

#include <utility>

#include "common/status_macros.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/gpu_args.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {
namespace {

// A host copy of a GPU tensor, and the way back.
struct Staged {
  Tensor host;
  const TensorView* device = nullptr;

  absl::Status CopyBack() const {
    return CopyHostToDevice(device->device.index, host.data(), device->data, host.nbytes());
  }
};

absl::StatusOr<Staged> Stage(const std::string& label, const TensorView& device) {
  if (absl::Status valid = CheckGpuTensor(label, device, device.device.index); !valid.ok()) {
    return valid;
  }
  Staged staged{Tensor(device.dtype, device.shape), &device};
  HVDD_RETURN_IF_ERROR(
      CopyDeviceToHost(device.device.index, device.data, staged.host.data(), staged.host.nbytes()));
  return staged;
}

class StagedCommunicator final : public GpuCommunicator {
 public:
  StagedCommunicator(CommunicatorRunner cpu, int rank, int size)
      : cpu_(std::move(cpu)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage(OpLabel("allreduce", options.name), inout));
    absl::Status status =
        cpu_([&](Communicator& cpu) { return cpu.Allreduce(staged.host.view(), options); });
    return status.ok() ? staged.CopyBack() : status;
  }

  absl::StatusOr<Tensor> Allgather(const TensorView& input) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("allgather", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(cpu_([&](Communicator& cpu) {
      result = cpu.Allgather(staged.host.view());
      return result.status();
    }));
    return result;
  }

  absl::Status Broadcast(TensorView inout, int root) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("broadcast", inout));
    absl::Status status =
        cpu_([&](Communicator& cpu) { return cpu.Broadcast(staged.host.view(), root); });
    return status.ok() ? staged.CopyBack() : status;
  }

  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("alltoall", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(cpu_([&](Communicator& cpu) {
      result = cpu.Alltoall(staged.host.view(), splits, received_splits);
      return result.status();
    }));
    return result;
  }

  absl::StatusOr<Tensor> Reducescatter(const TensorView& input,
                                       const ReducescatterOptions& options) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("reducescatter", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(cpu_([&](Communicator& cpu) {
      result = cpu.Reducescatter(staged.host.view(), options);
      return result.status();
    }));
    return result;
  }

  absl::Status Adasum(TensorView, double, double) override {
    return absl::InvalidArgumentError("Adasum in the engine takes CPU tensors only");
  }

  absl::Status Barrier() override {
    return cpu_([](Communicator& cpu) { return cpu.Barrier(); });
  }

  // Nothing of its own to abort: the CPU communicator goes with its generation.
  void Abort() override {}
  absl::Status health() const override { return absl::OkStatus(); }

 private:
  const CommunicatorRunner cpu_;
  const int rank_;
  const int size_;
};

}  // namespace

std::unique_ptr<GpuCommunicator> MakeStagedCommunicator(CommunicatorRunner cpu, int rank,
                                                        int size) {
  return std::make_unique<StagedCommunicator>(std::move(cpu), rank, size);
}

}  // namespace horovodd::internal
