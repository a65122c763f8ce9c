// The communicator of a ring whose ranks all share this host: every op in
// the host's shared memory (shm/shm_collectives.h), and the engine's
// negotiation rounds there too (shm_negotiator.h). The TCP ring of the same
// ranks stays beside it, the way the group was set up (comm_factory/): Adasum
// runs on it, an abort aborts both, and a failure of either (INVALID_ARGUMENT
// aside) fails the other, so that nothing waits on a transport that is dead.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/shm/shm_group.h"
#include "worker_runtime/shm_comm/shm_negotiator.h"

namespace horovodd::internal {

class ShmCommunicator final : public Communicator {
 public:
  // `group`: every rank of `ring`, each at its ring rank.
  ShmCommunicator(std::shared_ptr<GlooCommunicator> ring, std::unique_ptr<shm::ShmGroup> group);

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override;
  bool ReducesPartsInPlace() const override { return true; }
  absl::Status AllreduceParts(const std::vector<TensorView>& parts,
                              const AllreduceOptions& options) override;
  // Free at every size: the ready words ride in the allreduce's first round.
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
  void Abort() override;
  absl::Status health() const override;

 private:
  friend class ShmNegotiator;

  // The deadline of an op that starts now: the ring's timeout.
  absl::Time Deadline() const;
  // A failure here (INVALID_ARGUMENT aside) fails the group and the ring.
  absl::Status AfterLocal(absl::Status status);
  template <typename T>
  absl::StatusOr<T> AfterLocal(absl::StatusOr<T> result) {
    if (!result.ok()) AfterLocal(result.status()).IgnoreError();
    return result;
  }

  const std::shared_ptr<GlooCommunicator> ring_;
  const std::unique_ptr<shm::ShmGroup> group_;
  ShmNegotiator negotiator_;  // over group_: declared after it
};

}  // namespace horovodd::internal
