#include "worker_runtime/comm_factory/host_layout.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_ops.h"
#include "worker_runtime/shm/shm_segment.h"

namespace horovodd::internal {
namespace {

// What each rank tells the ring about itself.
enum Word : int {
  kLocalRank,
  kLocalSize,
  kCrossRank,
  kPid,
  kSegmentFd,  // the leader's memfd, -1 elsewhere
  kBootId,
  kHierarchical,
  kWords
};

// Each host's ring ranks by local rank, hosts in the daemon's order (host
// h holds the rank with local rank 0 and cross rank h; the rank with local
// rank l and cross rank c is on the c-th host that has a local rank l, as
// the daemon's AssignRanks numbers them). Empty when the records do not
// describe hosts that way.
std::vector<std::vector<int>> HostsOf(const std::vector<std::vector<int64_t>>& records) {
  const int n = static_cast<int>(records.size());
  std::map<int64_t, int> leader_of_host;  // cross rank of a leader -> its ring rank
  for (int r = 0; r < n; ++r) {
    if (records[r][kLocalRank] == 0) leader_of_host[records[r][kCrossRank]] = r;
  }
  std::vector<std::vector<int>> hosts;
  for (const auto& [cross, leader] : leader_of_host) {
    if (cross != static_cast<int64_t>(hosts.size())) return {};
    const int64_t size = records[leader][kLocalSize];
    if (size < 1 || size > n) return {};
    hosts.emplace_back(size, -1);
  }
  for (int r = 0; r < n; ++r) {
    const int64_t local = records[r][kLocalRank];
    const int64_t cross = records[r][kCrossRank];
    // The cross-th host having a local rank `local`.
    int64_t seen = -1;
    int host = -1;
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (local < static_cast<int64_t>(hosts[h].size()) && ++seen == cross) {
        host = static_cast<int>(h);
        break;
      }
    }
    if (host < 0 || local < 0 || hosts[host][local] != -1 ||
        records[r][kLocalSize] != static_cast<int64_t>(hosts[host].size())) {
      return {};
    }
    hosts[host][local] = r;
  }
  for (const auto& host : hosts) {
    if (std::find(host.begin(), host.end(), -1) != host.end()) return {};
  }
  return hosts;
}

// This rank's group over `host` (its ring ranks by local rank), or why not.
absl::StatusOr<std::unique_ptr<shm::ShmGroup>> OpenGroup(
    const std::vector<std::vector<int64_t>>& records, const std::vector<int>& host, int local_rank,
    std::unique_ptr<shm::ShmGroup> created, size_t slot_bytes) {
  if (created != nullptr) return created;
  if (local_rank == 0) return absl::FailedPreconditionError("no segment could be created here");
  const std::vector<int64_t>& leader = records[host[0]];
  if (leader[kSegmentFd] < 0) {
    return absl::FailedPreconditionError("the local leader has no segment");
  }
  if (leader[kBootId] != shm::BootId()) {
    return absl::FailedPreconditionError("the local leader runs on another machine");
  }
  shm::GroupOptions options;
  options.rank = local_rank;
  options.size = static_cast<int>(host.size());
  options.slot_bytes = slot_bytes;
  for (int r : host) options.pids.push_back(static_cast<pid_t>(records[r][kPid]));
  return shm::ShmGroup::Attach(options, static_cast<pid_t>(leader[kPid]),
                               static_cast<int>(leader[kSegmentFd]));
}

// The segment's key in the ring's store (host_layout.h), and what it holds.
constexpr char kSegmentKey[] = "shm-segment";
enum SegmentWord : int { kSegmentPid, kSegmentLeaderFd, kSegmentBootId, kSegmentWords };

// Each peer's word on the segment, under a key of its own, for the leader.
enum Vote : char { kMapped = 1, kNotMapped = 2, kGaveUp = 3 };
std::string VoteKey(int rank) { return absl::StrCat("shm-vote-", rank); }

// ConnectHostGroups where every rank of the ring is on this host (the
// daemon's answer says so: local size == ring size, local rank == ring
// rank): nothing to learn about where ranks are, and no pair of the ring is
// needed (the runtime connects none: RingOptions::eager_pairs). The leader
// publishes its segment (pid, descriptor, boot) under one key of the ring's
// store, which every peer reads and maps. Each peer then says whether it
// mapped it under a key of its own, and the leader reads them all in one
// wait of the store (through the daemon: one request, answered when the
// last peer's key is there) and gives its verdict in the segment: every
// rank that mapped it reads it there at once, and one that did not knows
// the answer already. A peer that fails on the way says so instead, and the
// leader fails the segment, which fails every peer waiting for the verdict.
// Then each watches its neighbours' pids, which they published in the
// segment. O(1) keys per peer, n - 1 for the leader, no pair.
absl::StatusOr<HostLayout> ConnectAllLocal(GlooCommunicator& ring, const LocalOptions& options) {
  HostLayout layout;
  GlooContext& context = ring.context();
  context.set_spans_hosts_with_peers(false);
  const int n = ring.size();
  const bool leader = ring.rank() == 0;
  // Every rank runs every step whatever it can do, so that all agree.
  const bool placed = options.local_rank == ring.rank();
  std::unique_ptr<shm::ShmGroup> group;
  shm::GroupOptions group_options;
  group_options.rank = ring.rank();
  group_options.size = n;
  group_options.slot_bytes = options.slot_bytes;
  group_options.rank_zero_decides_from = options.rank_zero_decides_from;
  group_options.pids.assign(n, 0);  // the neighbours' come from the segment
  if (leader) {
    int64_t words[kSegmentWords] = {getpid(), -1, shm::BootId()};
    if (options.enabled && placed) {
      absl::StatusOr<std::unique_ptr<shm::ShmGroup>> made = shm::ShmGroup::Create(group_options);
      if (made.ok()) {
        group = *std::move(made);
        words[kSegmentLeaderFd] = group->segment().fd();
      }
    }
    const char* bytes = reinterpret_cast<const char*>(words);
    HVDD_RETURN_IF_ERROR(
        context.PublishKey(kSegmentKey, std::vector<char>(bytes, bytes + sizeof(words))));
    // Every peer reads the same key: with no segment, none waits for a verdict.
    if (group == nullptr) return layout;
    std::vector<std::string> keys;
    for (int r = 1; r < n; ++r) keys.push_back(VoteKey(r));
    absl::StatusOr<std::vector<std::vector<char>>> votes = context.ReadKeys(keys);
    if (!votes.ok()) {
      group->Fail();  // wakes the peers waiting for the verdict
      return votes.status();
    }
    bool all_mapped = true;
    for (int r = 1; r < n; ++r) {
      const std::vector<char>& vote = (*votes)[r - 1];
      if (vote.size() != 1 || vote[0] == kGaveUp) {
        group->Fail();
        return absl::UnavailableError(absl::StrCat(
            "rank ", r, " gave up setting up this host's shared memory (gloo context rank 0 of ", n,
            ")"));
      }
      all_mapped = all_mapped && vote[0] == kMapped;
    }
    group->Decide(all_mapped);
    group->segment().CloseFd();  // every peer tried to map it before it voted
    if (!all_mapped) return layout;
  } else {
    // The leader may be waiting for our word: give it, whatever failed.
    const auto give_up = [&](absl::Status failure) {
      context.PublishKeyDespiteFailure(VoteKey(ring.rank()), {kGaveUp}).IgnoreError();
      if (group != nullptr) group->Fail();  // wakes the peers waiting for the verdict
      return failure;
    };
    absl::StatusOr<std::vector<char>> key = context.ReadKey(kSegmentKey);
    if (!key.ok()) return give_up(key.status());
    int64_t words[kSegmentWords] = {0, -1, 0};
    if (key->size() == sizeof(words)) std::memcpy(words, key->data(), sizeof(words));
    if (words[kSegmentLeaderFd] < 0) return layout;  // no segment: no verdict to wait for
    if (options.enabled && placed && words[kSegmentBootId] == shm::BootId()) {
      absl::StatusOr<std::unique_ptr<shm::ShmGroup>> opened =
          shm::ShmGroup::Attach(group_options, static_cast<pid_t>(words[kSegmentPid]),
                                static_cast<int>(words[kSegmentLeaderFd]));
      if (opened.ok()) {
        group = *std::move(opened);
        // A leader that dies before its verdict must not leave us waiting for it.
        group->WatchLeader(static_cast<pid_t>(words[kSegmentPid]));
      }
    }
    const Vote vote = group != nullptr ? kMapped : kNotMapped;
    if (absl::Status said = context.PublishKey(VoteKey(ring.rank()), {vote}); !said.ok()) {
      return give_up(said);
    }
    if (group == nullptr) return layout;
    const absl::Time deadline = absl::Now() + absl::FromChrono(context.getTimeout());
    HVDD_ASSIGN_OR_RETURN(const bool all_mapped, group->AwaitDecision(deadline));
    if (!all_mapped) return layout;
  }
  group->WatchNeighbours();
  layout.host_of_rank.assign(n, 0);
  layout.group = std::move(group);
  layout.all_local = true;
  layout.crossing.mode = options.hierarchical;
  return layout;
}

}  // namespace

absl::StatusOr<HostLayout> ConnectHostGroups(GlooCommunicator& ring, const LocalOptions& options) {
  HostLayout layout;
  // Every rank takes part in the exchange, even with shared memory off here,
  // so that a ring whose ranks disagree on HOROVODD_SHM still agrees.
  if (ring.size() == 1) return layout;
  const int n = ring.size();
  if (options.local_size == n && ring.context().has_store()) return ConnectAllLocal(ring, options);
  // The leader of a host with peers creates the segment before the exchange.
  std::unique_ptr<shm::ShmGroup> created;
  if (options.enabled && options.local_rank == 0 && options.local_size > 1) {
    shm::GroupOptions group;
    group.size = options.local_size;
    group.slot_bytes = options.slot_bytes;
    group.rank_zero_decides_from = options.rank_zero_decides_from;
    group.pids.assign(options.local_size, 0);  // filled in below
    absl::StatusOr<std::unique_ptr<shm::ShmGroup>> made = shm::ShmGroup::Create(group);
    if (made.ok()) created = *std::move(made);
  }
  int64_t words[kWords];
  words[kLocalRank] = options.local_rank;
  words[kLocalSize] = options.local_size;
  words[kCrossRank] = options.cross_rank;
  words[kPid] = getpid();
  words[kSegmentFd] = created != nullptr ? created->segment().fd() : -1;
  words[kBootId] = shm::BootId();
  words[kHierarchical] = options.enabled ? static_cast<int64_t>(options.hierarchical) : -1;
  HVDD_ASSIGN_OR_RETURN(const std::vector<uint8_t> all,
                        AllgatherRecords(ring.context(), words, sizeof(words)));
  std::vector<std::vector<int64_t>> records(n, std::vector<int64_t>(kWords));
  for (int r = 0; r < n; ++r) {
    std::memcpy(records[r].data(), all.data() + r * sizeof(words), sizeof(words));
  }

  // Every rank computes the same layout from the same records.
  const std::vector<std::vector<int>> hosts = HostsOf(records);
  const bool some_host_has_peers = std::any_of(
      hosts.begin(), hosts.end(), [](const std::vector<int>& h) { return h.size() > 1; });
  ring.context().set_spans_hosts_with_peers(hosts.size() > 1 && some_host_has_peers);
  bool usable = some_host_has_peers &&
                std::none_of(records.begin(), records.end(),
                             [](const std::vector<int64_t>& r) { return r[kHierarchical] < 0; });
  std::unique_ptr<shm::ShmGroup> group;
  int my_host = -1;
  if (usable) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (std::find(hosts[h].begin(), hosts[h].end(), ring.rank()) != hosts[h].end()) {
        my_host = static_cast<int>(h);
      }
    }
    const std::vector<int>& host = hosts[my_host];
    if (host.size() > 1) {
      if (created != nullptr) {
        // The leader learns its peers' pids only now.
        std::vector<pid_t> pids;
        for (int r : host) pids.push_back(static_cast<pid_t>(records[r][kPid]));
        created->SetPids(std::move(pids));
      }
      absl::StatusOr<std::unique_ptr<shm::ShmGroup>> opened =
          OpenGroup(records, host, options.local_rank, std::move(created), options.slot_bytes);
      if (opened.ok()) {
        group = *std::move(opened);
      } else {
        usable = false;
      }
    }
  }
  // All or none: the ranks agree on whether every group came up.
  const uint8_t mine_up = usable ? 1 : 0;
  HVDD_ASSIGN_OR_RETURN(const std::vector<uint8_t> up,
                        AllgatherRecords(ring.context(), &mine_up, sizeof(mine_up)));
  if (group != nullptr) group->segment().CloseFd();  // every peer mapped it
  if (std::find(up.begin(), up.end(), 0) != up.end()) return layout;

  layout.host_of_rank.assign(n, -1);
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int r : hosts[h]) layout.host_of_rank[r] = static_cast<int>(h);
  }
  if (group == nullptr) return layout;
  layout.group = std::move(group);
  layout.all_local = hosts.size() == 1;
  layout.crossing.mode = static_cast<HierarchicalAllreduce>(records[0][kHierarchical]);
  const size_t local_size = hosts[my_host].size();
  const bool same_sizes = std::all_of(hosts.begin(), hosts.end(), [&](const std::vector<int>& h) {
    return h.size() == local_size;
  });
  if (!layout.all_local && same_sizes) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (static_cast<int>(h) == my_host) layout.crossing.cross_index = static_cast<int>(h);
      layout.crossing.cross_ranks.push_back(hosts[h][options.local_rank]);
    }
  }
  return layout;
}

LocalOptions SubsetPlaces(const std::vector<int>& host_of_rank, const std::vector<int>& members,
                          int set_rank, LocalOptions base) {
  HVDD_CHECK(set_rank >= 0 && set_rank < static_cast<int>(members.size()));
  // The set's members on each host, in set-rank order; hosts in global order.
  std::map<int, std::vector<int>> by_host;
  for (size_t i = 0; i < members.size(); ++i) {
    HVDD_CHECK(members[i] >= 0 && members[i] < static_cast<int>(host_of_rank.size()));
    by_host[host_of_rank[members[i]]].push_back(static_cast<int>(i));
  }
  const int my_host = host_of_rank[members[set_rank]];
  const std::vector<int>& mine = by_host[my_host];
  base.local_rank = static_cast<int>(std::find(mine.begin(), mine.end(), set_rank) - mine.begin());
  base.local_size = static_cast<int>(mine.size());
  // As the daemon numbers cross ranks (HostsOf): among the hosts that have
  // a local rank `local_rank`, this one's index.
  base.cross_rank = 0;
  for (const auto& [host, ranks] : by_host) {
    if (host == my_host) break;
    if (static_cast<int>(ranks.size()) > base.local_rank) ++base.cross_rank;
  }
  return base;
}

}  // namespace horovodd::internal
