// The communicator of a ring across hosts where some hold several of its
// ranks, with each such host's shared memory set up: an allreduce goes
// hierarchical where HOROVOD_HIERARCHICAL_ALLREDUCE says so and every host
// holds as many ranks (CrossesHostsFor); everything else goes over the TCP
// ring.
//
// The hierarchical allreduce, in three steps as in Horovod 0.28: the host's
// shared memory reduces within the host, leaving each local rank its own
// contiguous part (shm/shm_own_parts.h); that part is allreduced over TCP
// with the same local rank of every other host, in one exchange; the host's
// shared memory hands every part to every local rank. A large tensor goes
// through the steps in a few pieces, each piece's crossing in flight while
// the next piece is reduced within the host.
//
// A failure kills both transports, on every rank: the ring's peers on other
// hosts learn it as its pairs close, the local ranks as the group fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal {

// HOROVOD_HIERARCHICAL_ALLREDUCE: 1 on, 0 off, unset automatic by size.
enum class HierarchicalAllreduce { kAuto, kOn, kOff };

// The automatic choice: an allreduce of at least this many bytes goes
// hierarchical (below it the flat direct exchange is one hop).
inline constexpr size_t kHierarchicalAutoMinBytes = size_t{64} << 10;

// Where this rank's part crosses hosts.
struct HostCrossing {
  // The ring ranks of this local rank on every host, by host, and this
  // host's index among them; empty where the hierarchical allreduce cannot
  // run (hosts of different sizes).
  std::vector<int> cross_ranks;
  int cross_index = 0;
  HierarchicalAllreduce mode = HierarchicalAllreduce::kAuto;
};

class HierarchicalCommunicator final : public Communicator {
 public:
  // `group`: this rank's host, its local ranks in the order of `crossing`.
  HierarchicalCommunicator(std::shared_ptr<GlooCommunicator> ring,
                           std::unique_ptr<shm::ShmGroup> group, HostCrossing crossing);

  // Whether an allreduce of `bytes` goes hierarchical (else over the ring).
  bool CrossesHostsFor(size_t bytes) const;

  int rank() const override { return ring_->rank(); }
  int size() const override { return ring_->size(); }
  absl::Status Allreduce(TensorView inout, const AllreduceOptions& options) override;
  SelfConfirmation ConfirmsItself(const TensorView& tensor,
                                  const AllreduceOptions& options) const override {
    return ring_->ConfirmsItself(tensor, options);
  }
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
  Negotiator* negotiator() override { return ring_->negotiator(); }
  void Abort() override;
  absl::Status health() const override;

 private:
  absl::Status AllreduceAcrossHosts(TensorView inout, const AllreduceOptions& options);
  // A step in the host's memory failed: the ring fails too (INVALID_ARGUMENT
  // aside, which every rank rejects alike).
  absl::Status AfterLocal(absl::Status status);
  // An op on the ring failed: where the ring is dead now, the group is too.
  absl::Status AfterRing(absl::Status status);
  template <typename T>
  absl::StatusOr<T> AfterRing(absl::StatusOr<T> result) {
    if (!result.ok()) AfterRing(result.status()).IgnoreError();
    return result;
  }

  const std::shared_ptr<GlooCommunicator> ring_;
  const std::unique_ptr<shm::ShmGroup> group_;
  const HostCrossing crossing_;
};

}  // namespace horovodd::internal
