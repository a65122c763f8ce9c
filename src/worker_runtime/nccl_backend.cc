#include "worker_runtime/nccl_backend.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker_runtime/cuda_memory.h"
#include "worker_runtime/nccl_comm.h"
#include "worker_runtime/nccl_ops.h"

namespace horovodd::internal {
namespace {

absl::StatusOr<Tensor> ToHost(absl::StatusOr<DeviceTensor> result) {
  if (!result.ok()) return result.status();
  return result->ToHost();
}

class NcclBackend final : public GpuBackend {
 public:
  explicit NcclBackend(NcclBackendOptions options) : options_(std::move(options)) {}

  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override {
    absl::StatusOr<NcclComm*> comm = Comm(inout);
    if (!comm.ok()) return comm.status();
    return internal::Allreduce(**comm, inout, options);
  }

  absl::StatusOr<Tensor> Allgather(const TensorView& input) override {
    absl::StatusOr<NcclComm*> comm = Comm(input);
    if (!comm.ok()) return comm.status();
    return ToHost(internal::Allgather(**comm, input));
  }

  absl::Status Broadcast(TensorView inout, int root) override {
    absl::StatusOr<NcclComm*> comm = Comm(inout);
    if (!comm.ok()) return comm.status();
    return internal::Broadcast(**comm, inout, root);
  }

  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits) override {
    absl::StatusOr<NcclComm*> comm = Comm(input);
    if (!comm.ok()) return comm.status();
    return ToHost(internal::Alltoall(**comm, input, splits, received_splits));
  }

  absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op) override {
    absl::StatusOr<NcclComm*> comm = Comm(input);
    if (!comm.ok()) return comm.status();
    return ToHost(internal::Reducescatter(**comm, input, op));
  }

 private:
  // The generation's communicator, made on the first op's device.
  absl::StatusOr<NcclComm*> Comm(const TensorView& tensor) {
    if (comm_ != nullptr) return comm_.get();
    if (!failure_.ok()) return failure_;
    if (absl::Status device = CheckCudaDevice(tensor.device.index); !device.ok()) return device;
    NcclCommOptions comm_options;
    comm_options.rank = options_.rank;
    comm_options.size = options_.size;
    comm_options.device = tensor.device.index;
    comm_options.timeout = options_.timeout;
    comm_options.should_abort = options_.should_abort;
    comm_options.name = absl::StrCat("generation ", options_.generation, "'s NCCL communicator");
    absl::StatusOr<std::unique_ptr<NcclComm>> comm =
        NcclComm::Create(std::move(comm_options), *options_.store);
    if (!comm.ok()) {
      failure_ = comm.status();
      return failure_;
    }
    comm_ = *std::move(comm);
    return comm_.get();
  }

  const NcclBackendOptions options_;
  std::unique_ptr<NcclComm> comm_;  // null until the first op
  absl::Status failure_;            // why making comm_ failed
};

}  // namespace

std::unique_ptr<GpuBackend> MakeNcclBackend(NcclBackendOptions options) {
  return std::make_unique<NcclBackend>(std::move(options));
}

}  // namespace horovodd::internal
