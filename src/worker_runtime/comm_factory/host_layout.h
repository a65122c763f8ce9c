// Where the ranks of a freshly connected ring are, learned over the ring,
// and the shared memory of each host that holds several of them, set up over
// it (ConnectHostGroups): what comm_factory.h chooses a communicator from.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/hierarchical/hierarchical_communicator.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal {

struct LocalOptions {
  bool enabled = true;  // HOROVODD_SHM=0: everything over TCP
  // This rank's place on its host, from the daemon's assignment.
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  HierarchicalAllreduce hierarchical = HierarchicalAllreduce::kAuto;
  size_t slot_bytes = shm::kDefaultSlotBytes;
  // HOROVODD_SHM_DECIDER_FROM (shm::GroupOptions).
  int rank_zero_decides_from = shm::kRankZeroDecidesFrom;
};

// What the ranks learned, the same on every rank but `group` and `crossing`.
struct HostLayout {
  // Where every host's group came up (all or none: ranks must agree on
  // every collective's path): this rank's host's group, null on a host with
  // only this rank; and every ring rank's host index, hosts in the daemon's
  // order. Otherwise null and empty.
  std::unique_ptr<shm::ShmGroup> group;
  std::vector<int> host_of_rank;
  // Every rank of the ring is on this host.
  bool all_local = false;
  // For the hierarchical allreduce (cross_ranks empty where it cannot run:
  // one host, or hosts of different sizes), with rank 0's choice of it.
  HostCrossing crossing;
};

// Run by every rank of a freshly connected ring, before its first
// collective: each host's leader creates the segment and its local peers
// map it. Where every rank is on this host (options.local_size is the
// ring's size) and the ring keeps its rendezvous store (a lazy ring), the
// daemon's answer says all there is to know: the leader publishes its
// segment under one key, and the ranks agree round the ring that all of
// them mapped it, O(1) work per rank. Otherwise the ranks exchange where
// they are (two small allgathers of log2(n) rounds each, gloo_ops.h's
// AllgatherRecords). Also tells the ring's context whether its ranks
// span hosts with several ranks each (GlooContext::spans_hosts_with_peers). Only the ring's own
// failures are errors; a group that cannot be set up (another machine behind one host name, no
// memfd) leaves every rank without one.
absl::StatusOr<HostLayout> ConnectHostGroups(GlooCommunicator& ring, const LocalOptions& options);

// A process set's places for ConnectHostGroups on its own ring: `members`
// are the set's ranks on the global ring, in set-rank order, `set_rank` this
// rank's index among them, and `host_of_rank` what the global ring's
// ConnectHostGroups gave. Each host's members become its local ranks in
// set-rank order; hosts keep the global order. `base` gives the rest.
LocalOptions SubsetPlaces(const std::vector<int>& host_of_rank, const std::vector<int>& members,
                          int set_rank, LocalOptions base);

}  // namespace horovodd::internal
