// The TCP ring as a Communicator: gloo_ops.h's collectives and Adasum on one
// Gloo context, and the engine's negotiation rounds over it
// (gloo_negotiator.h). Every generation's ring is one (comm_factory/
// wraps it in a shared-memory or hierarchical communicator where the ranks
// share hosts, which run their TCP parts through it).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_negotiator.h"

namespace horovodd::internal {

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(std::shared_ptr<GlooContext> context);

  GlooContext& context() const { return *context_; }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override;
  SelfConfirmation ConfirmsItself(const TensorView& tensor,
                                  const AllreduceOptions& options) const override;
  absl::StatusOr<bool> AllreduceIfAllReady(TensorView tensor, bool ready,
                                           const AllreduceOptions& options) override;
  absl::StatusOr<Tensor> Allgather(const TensorView& input) override;
  absl::Status Broadcast(TensorView inout, int root) override;
  absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits,
                                  std::vector<int64_t>* received_splits) override;
  absl::StatusOr<Tensor> Reducescatter(const TensorView& input,
                                       const ReducescatterOptions& options) override;
  absl::Status Adasum(TensorView inout, double prescale_factor, double postscale_factor) override;
  absl::Status Barrier() override;
  Negotiator* negotiator() override { return &negotiator_; }
  void Abort() override { context_->Abort(); }
  absl::Status health() const override { return context_->health(); }

 private:
  const std::shared_ptr<GlooContext> context_;
  // After context_: its buffers go while the context's pairs still exist.
  GlooNegotiator negotiator_;
};

}  // namespace horovodd::internal
