#include "worker_runtime/comm_factory/comm_factory.h"

#include <utility>

#include "common/status_macros.h"
#include "worker_runtime/hierarchical/hierarchical_communicator.h"
#include "worker_runtime/shm_comm/shm_communicator.h"

namespace horovodd::internal {

std::shared_ptr<Communicator> ChooseCommunicator(std::shared_ptr<GlooCommunicator> ring,
                                                 HostLayout layout) {
  // No host shares memory, or this rank is alone on its host (then its
  // ring's allreduce cannot go hierarchical anywhere: hosts differ in size).
  if (layout.group == nullptr) return ring;
  if (layout.all_local) {
    return std::make_shared<ShmCommunicator>(std::move(ring), std::move(layout.group));
  }
  return std::make_shared<HierarchicalCommunicator>(std::move(ring), std::move(layout.group),
                                                    std::move(layout.crossing));
}

absl::StatusOr<std::shared_ptr<Communicator>> ConnectCommunicator(
    std::shared_ptr<GlooCommunicator> ring, const LocalOptions& options,
    std::vector<int>* host_of_rank) {
  if (host_of_rank != nullptr) host_of_rank->clear();
  HVDD_ASSIGN_OR_RETURN(HostLayout layout, ConnectHostGroups(*ring, options));
  if (host_of_rank != nullptr) *host_of_rank = layout.host_of_rank;
  return ChooseCommunicator(std::move(ring), std::move(layout));
}

}  // namespace horovodd::internal
