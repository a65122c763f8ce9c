// Shared memory among the ranks of a ring that share a host: setting up a
// generation's group over the ring (ConnectLocalGroup), and which path each
// collective takes (LocalPath), for gloo_ops.cc and gloo_allreduce.cc.
//
//   every rank on this host   every collective in shared memory
//                             (shm/shm_collectives.h);
//   several hosts             allreduce hierarchical where HierarchicalFor
//                             says so: reduced within each host in shared
//                             memory, each local rank's slice allreduced over
//                             TCP with the same local rank of every other
//                             host (one ring per local rank), shared back
//                             within the host; everything else over TCP.
//
// The engine's negotiation rounds make the same choice themselves
// (engine_negotiation.cc): the host's segment when every rank shares it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal {

// HOROVOD_HIERARCHICAL_ALLREDUCE: 1 on, 0 off, unset automatic by size.
enum class HierarchicalAllreduce { kAuto, kOn, kOff };

// The automatic choice: an allreduce of at least this many bytes goes
// hierarchical (below it the flat direct exchange is one hop).
inline constexpr size_t kHierarchicalAutoMinBytes = size_t{64} << 10;

struct LocalOptions {
  bool enabled = true;  // HOROVODD_SHM=0: everything over TCP
  // This rank's place on its host, from the daemon's assignment.
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  HierarchicalAllreduce hierarchical = HierarchicalAllreduce::kAuto;
  size_t slot_bytes = shm::kDefaultSlotBytes;
};

struct LocalGroup {
  std::unique_ptr<shm::ShmGroup> group;
  // Every rank of the ring is on this host.
  bool all_local = false;
  // For the hierarchical allreduce (empty where it cannot run: hosts of
  // different sizes): the ring ranks of this local rank on every host, by
  // host, and this host's index among them.
  std::vector<int> cross_ranks;
  int cross_index = 0;
  int total_ranks = 0;
  HierarchicalAllreduce hierarchical = HierarchicalAllreduce::kAuto;
};

// Run by every rank of a freshly connected ring, before its first
// collective: the ranks exchange where they are (two small collectives on
// the ring), each host's leader creates the segment and its local peers map
// it, and context.local_group() is set where every host's group came up
// (all or none: ranks must agree on every collective's path). Only the
// ring's own failures are errors; a group that cannot be set up (another
// machine behind one host name, no memfd) leaves every rank on TCP.
//
// `host_of_rank` (optional) receives every ring rank's host index (hosts in
// the daemon's order) where every host's group came up, and is left empty
// where they did not: the same on every rank, so that a process set's ring
// can place its members (SubsetPlaces) on all of its ranks alike.
absl::Status ConnectLocalGroup(GlooContext& context, const LocalOptions& options,
                               std::vector<int>* host_of_rank = nullptr);

// A process set's places for ConnectLocalGroup on its own ring: `members`
// are the set's ranks on the global ring, in set-rank order, `set_rank` this
// rank's index among them, and `host_of_rank` what the global ring's
// ConnectLocalGroup gave. Each host's members become its local ranks in
// set-rank order; hosts keep the global order. `base` gives the rest.
LocalOptions SubsetPlaces(const std::vector<int>& host_of_rank, const std::vector<int>& members,
                          int set_rank, LocalOptions base);

// The group when every rank of `context` shares it, else null.
shm::ShmGroup* AllLocalGroup(GlooContext& context);
// The group when an allreduce of `bytes` goes hierarchical, else null.
LocalGroup* HierarchicalFor(GlooContext& context, size_t bytes);

// The deadline of a collective on `context` that starts now.
absl::Time CollectiveDeadline(const GlooContext& context);

// A shared-memory collective's result: what is not a bad argument also
// kills the context (a failed context is never reused, and its peers on
// other hosts learn it as the pairs close).
absl::Status AfterLocal(GlooContext& context, absl::Status status);
template <typename T>
absl::StatusOr<T> AfterLocal(GlooContext& context, absl::StatusOr<T> result) {
  if (!result.ok()) AfterLocal(context, result.status()).IgnoreError();
  return result;
}

}  // namespace horovodd::internal

namespace horovodd::internal {

// The hierarchical allreduce (see the top of this file), in place, on a
// context whose HierarchicalFor(bytes) gave `local`.
absl::Status AllreduceAcrossHosts(GlooContext& context, LocalGroup& local, TensorView inout,
                                  const AllreduceOptions& options);

}  // namespace horovodd::internal
