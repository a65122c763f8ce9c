#include "shm_test_support.h"

#include <unistd.h>

#include <utility>

#include <catch2/catch.hpp>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/shm_comm/shm_communicator.h"

namespace horovodd::testing {

using internal::shm::GroupOptions;
using internal::shm::ShmGroup;

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

std::vector<std::unique_ptr<ShmGroup>> MakeGroups(int size, size_t slot_bytes,
                                                  std::vector<pid_t> pids,
                                                  int rank_zero_decides_from) {
  GroupOptions options;
  options.size = size;
  options.slot_bytes = slot_bytes;
  options.rank_zero_decides_from = rank_zero_decides_from;
  options.pids = pids.empty() ? std::vector<pid_t>(size, getpid()) : std::move(pids);
  std::vector<std::unique_ptr<ShmGroup>> groups;
  options.rank = 0;
  auto leader = ShmGroup::Create(options);
  REQUIRE(leader.ok());
  groups.push_back(*std::move(leader));
  for (int r = 1; r < size && options.pids[r] == getpid(); ++r) {
    options.rank = r;
    auto peer = ShmGroup::Attach(options, getpid(), groups[0]->segment().fd());
    REQUIRE(peer.ok());
    groups.push_back(*std::move(peer));
  }
  groups[0]->segment().CloseFd();
  return groups;
}

pid_t ForkIdlePeer() {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  return child;
}

std::vector<Connected> ConnectEveryRank(
    RankGroup& group, const std::function<internal::LocalOptions(int rank)>& places) {
  return OnEveryRank<Connected>(group.size(), [&](int rank) {
    Connected c;
    auto ring = std::make_shared<internal::GlooCommunicator>(group.shared(rank));
    absl::StatusOr<internal::HostLayout> layout = internal::ConnectHostGroups(*ring, places(rank));
    c.status = layout.status().ToString();
    if (!layout.ok()) {
      // As a worker's runtime drops a ring whose set-up failed: its pairs close.
      internal::AbortGlooContext(group.context(rank));
      return c;
    }
    c.has_group = layout->group != nullptr;
    c.host_of_rank = layout->host_of_rank;
    c.comm = internal::ChooseCommunicator(std::move(ring), *std::move(layout));
    return c;
  });
}

Comms ConnectLocal(RankGroup& group, int hosts, internal::HierarchicalAllreduce hierarchical,
                   size_t slot_bytes) {
  const int per_host = group.size() / hosts;
  const std::vector<Connected> connected = ConnectEveryRank(group, [&](int rank) {
    internal::LocalOptions options;
    options.local_rank = rank % per_host;
    options.local_size = per_host;
    options.cross_rank = rank / per_host;
    options.hierarchical = hierarchical;
    options.slot_bytes = slot_bytes;
    return options;
  });
  Comms comms;
  for (const Connected& c : connected) {
    REQUIRE(c.status == "OK");
    REQUIRE(c.has_group);
    comms.push_back(c.comm);
  }
  return comms;
}

bool AllLocal(const internal::Communicator& comm) {
  return dynamic_cast<const internal::ShmCommunicator*>(&comm) != nullptr;
}

}  // namespace horovodd::testing
