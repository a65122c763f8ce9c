// How the rings of one host's ranks connect (comm_factory/host_layout.h) after
// a reset, at 64 ranks: the host, local and cross ranks each rank gets, the
// ring's pairs it connects (neighbours and rank +- 2^k only; none on one
// host), the keys read, and every rank kept on the TCP ring when one rank
// has no shared memory.
// Ranks are threads of this process.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shm_test_support.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/hierarchical/hierarchical_communicator.h"

namespace horovodd {
namespace {

using internal::Communicator;
using internal::LocalOptions;
using testing::AllLocal;
using testing::Connected;
using testing::ConnectEveryRank;
using testing::MakeTensor;
using testing::OnEveryRank;
using testing::RankGroup;

TEST_CASE("a reset at 64 ranks on four hosts gives every rank its host, local and cross ranks",
          "[shm][connect]") {
  // After a reset the survivors keep their order, so a host's ranks need not
  // be consecutive: here rank r is on host r % 4, local rank r / 4 there.
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 64;
  constexpr int kHosts = 4;
  RankGroup group(store, "reset64", kRanks);
  struct Got {
    std::string status;
    bool has_group = false;
    std::vector<int> host_of_rank;
    internal::HostCrossing crossing;
  };
  const std::vector<Got> got = OnEveryRank<Got>(kRanks, [&](int rank) {
    internal::GlooCommunicator ring(group.shared(rank));
    LocalOptions options;
    options.local_rank = rank / kHosts;
    options.local_size = kRanks / kHosts;
    options.cross_rank = rank % kHosts;
    options.slot_bytes = 4096;
    absl::StatusOr<internal::HostLayout> layout = internal::ConnectHostGroups(ring, options);
    Got g;
    g.status = layout.status().ToString();
    if (!layout.ok()) return g;
    g.has_group = layout->group != nullptr && layout->group->rank() == options.local_rank &&
                  layout->group->size() == options.local_size;
    g.host_of_rank = layout->host_of_rank;
    g.crossing = layout->crossing;
    return g;
  });
  std::vector<int> host_of_rank(kRanks);
  for (int r = 0; r < kRanks; ++r) host_of_rank[r] = r % kHosts;
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(got[rank].status == "OK");
    CHECK(got[rank].has_group);
    CHECK(got[rank].host_of_rank == host_of_rank);
    // The hierarchical allreduce's ring: this local rank on every host.
    std::vector<int> cross_ranks;
    for (int h = 0; h < kHosts; ++h) cross_ranks.push_back((rank / kHosts) * kHosts + h);
    CHECK(got[rank].crossing.cross_ranks == cross_ranks);
    CHECK(got[rank].crossing.cross_index == rank % kHosts);
    // Its ring talked to its neighbours and rank +- 2^k only.
    for (int peer = 0; peer < kRanks; ++peer) {
      const int distance =
          std::min((peer - rank + kRanks) % kRanks, (rank - peer + kRanks) % kRanks);
      const bool power_of_two = distance > 0 && (distance & (distance - 1)) == 0;
      INFO("peer " << peer);
      CHECK(group.context(rank).connected(peer) == power_of_two);
    }
  }
}

TEST_CASE("a reset at 64 ranks on one host sets up shared memory without a pair of the ring",
          "[shm][connect]") {
  // The daemon says every rank is on this host: nothing is exchanged about
  // where ranks are, and the runtime builds the ring without eager pairs.
  // Each peer reads one key (the leader's segment) and writes one (whether
  // it mapped it), the leader reads those in one wait, and each rank watches
  // its two neighbours. No rank ever connects to another: the collectives
  // run in the segment.
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 64;
  for (int generation = 1; generation <= 2; ++generation) {
    // The second generation: the survivors of a kill, ranked again from 0.
    const int ranks = kRanks - (generation - 1);
    const internal::RingConnectTotals before = internal::ProcessRingConnectTotals();
    RankGroup group(store, absl::StrCat("onehost", generation), ranks, testing::kCollectiveTimeout,
                    /*eager_pairs=*/false);
    const std::vector<Connected> connected = ConnectEveryRank(group, [&](int rank) {
      LocalOptions options;
      options.local_rank = rank;
      options.local_size = ranks;
      options.slot_bytes = 4096;
      return options;
    });
    const internal::RingConnectTotals after = internal::ProcessRingConnectTotals();
    CHECK(after.keys_read - before.keys_read == 2 * (ranks - 1));
    for (int rank = 0; rank < ranks; ++rank) {
      INFO("generation " << generation << ", rank " << rank);
      REQUIRE(connected[rank].status == "OK");
      CHECK(connected[rank].has_group);
      CHECK(AllLocal(*connected[rank].comm));
      CHECK(connected[rank].host_of_rank == std::vector<int>(ranks, 0));
    }
    // And its collectives run in shared memory on every rank: an allreduce
    // and a broadcast from the last rank.
    const std::vector<std::string> errors = OnEveryRank<std::string>(ranks, [&](int rank) {
      Communicator& comm = *connected[rank].comm;
      Tensor t = MakeTensor(DType::kFloat64, {3000}, [&](int64_t i) { return rank + i % 7; });
      AllreduceOptions sum;
      sum.op = ReduceOp::kSum;
      if (absl::Status st = comm.Allreduce(t.view(), sum); !st.ok()) return st.ToString();
      const std::string mismatch = testing::FirstMismatch(t, [&](int64_t i) {
        return ranks * (ranks - 1) / 2.0 + ranks * static_cast<double>(i % 7);
      });
      if (!mismatch.empty()) return mismatch;
      Tensor b = MakeTensor(DType::kFloat64, {100}, [&](int64_t i) { return rank * 1000.0 + i; });
      if (absl::Status st = comm.Broadcast(b.view(), ranks - 1); !st.ok()) return st.ToString();
      return testing::FirstMismatch(b, [&](int64_t i) { return (ranks - 1) * 1000.0 + i; });
    });
    CHECK(errors == std::vector<std::string>(ranks, ""));
    CHECK(internal::ProcessRingConnectTotals().pairs_connected == before.pairs_connected);
    for (int rank = 0; rank < ranks; ++rank) {
      INFO("generation " << generation << ", rank " << rank);
      CHECK(group.context(rank).connected_pairs() == 0);
    }
  }
}

TEST_CASE("a rank whose ring breaks during a one-host set-up fails every rank's at once",
          "[shm][connect]") {
  // It says so under its vote's key: the leader fails the segment, which
  // ends every peer's wait for the verdict. None waits out the timeout.
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 24;
  for (int broken : {kRanks / 2, kRanks - 1}) {
    INFO("rank " << broken << "'s ring aborted");
    RankGroup group(store, absl::StrCat("broken", broken), kRanks, testing::kCollectiveTimeout,
                    /*eager_pairs=*/false);
    const std::vector<Connected> connected = ConnectEveryRank(group, [&](int rank) {
      if (rank == broken) internal::AbortGlooContext(group.context(rank));
      LocalOptions options;
      options.local_rank = rank;
      options.local_size = kRanks;
      options.slot_bytes = 4096;
      return options;
    });
    for (int rank = 0; rank < kRanks; ++rank) {
      INFO("rank " << rank << ": " << connected[rank].status);
      CHECK(connected[rank].status != "OK");
      // Failed by the break, not by sitting out the ring's timeout.
      CHECK_FALSE(absl::StrContains(absl::AsciiStrToLower(connected[rank].status), "timeout"));
      CHECK_FALSE(absl::StrContains(connected[rank].status, "DEADLINE_EXCEEDED"));
    }
  }
}

TEST_CASE("one rank on the host without shared memory keeps every rank on the TCP ring",
          "[shm][connect]") {
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 24;
  // The leader, a middle rank, the last rank.
  for (int off : {0, kRanks / 2, kRanks - 1}) {
    INFO("shared memory off on rank " << off);
    RankGroup group(store, absl::StrCat("offon", off), kRanks, testing::kCollectiveTimeout,
                    /*eager_pairs=*/false);
    const std::vector<Connected> connected = ConnectEveryRank(group, [&](int rank) {
      LocalOptions options;
      options.enabled = rank != off;
      options.local_rank = rank;
      options.local_size = kRanks;
      options.slot_bytes = 4096;
      return options;
    });
    for (int rank = 0; rank < kRanks; ++rank) {
      INFO("rank " << rank);
      REQUIRE(connected[rank].status == "OK");
      CHECK_FALSE(connected[rank].has_group);
      CHECK(connected[rank].host_of_rank.empty());
      CHECK_FALSE(AllLocal(*connected[rank].comm));
    }
    CHECK(OnEveryRank<std::string>(kRanks, [&](int rank) {
            return connected[rank].comm->Barrier().ToString();
          }) == std::vector<std::string>(kRanks, "OK"));
  }
}

}  // namespace
}  // namespace horovodd
