// Set-up shared by the shared-memory tests (test_shm*.cc): one host's ranks
// as threads of this process, over ShmGroups of one segment or through the
// communicators comm_factory/ chooses for a ring's ranks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::testing {

// An op deadline a minute from now: far enough for a loaded machine, so
// only the case under test (an abort, a dead peer) ends a wait early.
absl::Time Deadline();

// Groups over one segment, index = local rank, for the ranks whose pid is
// ours (every rank when `pids` is empty; the others stand for processes
// that never arrive). The leader, rank 0, must be ours.
std::vector<std::unique_ptr<internal::shm::ShmGroup>> MakeGroups(
    int size, size_t slot_bytes, std::vector<pid_t> pids = {},
    int rank_zero_decides_from = internal::shm::kRankZeroDecidesFrom);

// A child process standing for a local peer that never arrives: the group
// only needs its pid. The caller kills and reaps it.
pid_t ForkIdlePeer();

// Every rank's communicator.
using Comms = std::vector<std::shared_ptr<internal::Communicator>>;

// What ConnectHostGroups gave each rank, and the communicator chosen from it.
struct Connected {
  std::string status;
  bool has_group = false;
  std::vector<int> host_of_rank;
  std::shared_ptr<internal::Communicator> comm;
};

// ConnectHostGroups and ChooseCommunicator on every rank of `group`, each
// with the options places(rank). A rank whose set-up fails aborts its ring,
// as a worker drops it.
std::vector<Connected> ConnectEveryRank(
    RankGroup& group, const std::function<internal::LocalOptions(int rank)>& places);

// Sets up every rank's local group: `hosts` hosts of equal size, ranks in
// host order (as the daemon numbers them when each host joins whole).
Comms ConnectLocal(RankGroup& group, int hosts, internal::HierarchicalAllreduce hierarchical,
                   size_t slot_bytes);

// Every rank of the communicator shares this host's memory.
bool AllLocal(const internal::Communicator& comm);

}  // namespace horovodd::testing
