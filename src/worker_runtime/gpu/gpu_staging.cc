#include "worker_runtime/gpu/gpu_staging.h"

#include <utility>

#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_ops.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/gpu_args.h"

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
  HVDD_RETURN_IF_ERROR(CopyDeviceToHost(device.device.index, device.data, staged.host.data(),
                                        staged.host.nbytes()));
  return staged;
}

class StagedBackend final : public GpuBackend {
 public:
  explicit StagedBackend(RingRunner ring) : ring_(std::move(ring)) {}

  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage(OpLabel("allreduce", options.name), inout));
    absl::Status status = ring_([&](GlooContext& ring) {
      return internal::Allreduce(ring, staged.host.view(), options);
    });
    return status.ok() ? staged.CopyBack() : status;
  }

  absl::StatusOr<Tensor> Allgather(const TensorView& input) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("allgather", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(ring_([&](GlooContext& ring) {
      result = internal::Allgather(ring, staged.host.view());
      return result.status();
    }));
    return result;
  }

  absl::Status Broadcast(TensorView inout, int root) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("broadcast", inout));
    absl::Status status = ring_([&](GlooContext& ring) {
      return internal::Broadcast(ring, staged.host.view(), root);
    });
    return status.ok() ? staged.CopyBack() : status;
  }

  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("alltoall", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(ring_([&](GlooContext& ring) {
      result = internal::Alltoall(ring, staged.host.view(), splits, received_splits);
      return result.status();
    }));
    return result;
  }

  absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op) override {
    HVDD_ASSIGN_OR_RETURN(Staged staged, Stage("reducescatter", input));
    absl::StatusOr<Tensor> result;
    HVDD_RETURN_IF_ERROR(ring_([&](GlooContext& ring) {
      result = internal::Reducescatter(ring, staged.host.view(), op);
      return result.status();
    }));
    return result;
  }

 private:
  const RingRunner ring_;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeStagedBackend(RingRunner ring) {
  return std::make_unique<StagedBackend>(std::move(ring));
}

}  // namespace horovodd::internal
