// The communicator a generation's ring (or a process set's) runs every
// collective on, chosen once, from where its ranks are (host_layout.h):
//   every rank on this host, sharing memory   ShmCommunicator (shm_comm/)
//   several hosts, this one sharing memory    HierarchicalCommunicator
//   with other ranks                          (hierarchical/: its allreduce
//                                             goes hierarchical where
//                                             HOROVOD_HIERARCHICAL_ALLREDUCE
//                                             and the hosts' sizes allow)
//   anything else                             the TCP ring itself (gloo/)
// The runtime calls ConnectCommunicator once per generation and process set,
// on every rank alike, so every rank makes the same choice.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/comm_factory/host_layout.h"
#include "worker_runtime/gloo/gloo_communicator.h"

namespace horovodd::internal {

// The communicator for `ring` and what ConnectHostGroups learned on it.
std::shared_ptr<Communicator> ChooseCommunicator(std::shared_ptr<GlooCommunicator> ring,
                                                 HostLayout layout);

// ConnectHostGroups, then ChooseCommunicator: run by every rank of a freshly
// connected ring before its first collective. `host_of_rank` (optional)
// receives HostLayout::host_of_rank, for the process sets' rings
// (SubsetPlaces). Errors are the ring's own (it is dead then).
absl::StatusOr<std::shared_ptr<Communicator>> ConnectCommunicator(
    std::shared_ptr<GlooCommunicator> ring, const LocalOptions& options,
    std::vector<int>* host_of_rank = nullptr);

}  // namespace horovodd::internal
