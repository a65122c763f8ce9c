// A ring's pairs connect lazily (GlooContext::ConnectPeers): its two
// neighbours when it is built, any other peer when a collective first talks
// to it, and never a peer it does not talk to; a reset's rebuild costs each
// rank its two neighbours, whatever the ring's size.
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd {
namespace {

using testing::OnEveryRank;
using testing::RankGroup;

// The peers `context` has connected to, in rank order.
std::set<int> ConnectedPeers(const internal::GlooContext& context) {
  std::set<int> peers;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank && context.connected(peer)) peers.insert(peer);
  }
  return peers;
}

std::set<int> Neighbours(int rank, int size) {
  return {(rank + 1) % size, (rank + size - 1) % size};
}

// Every rank's int64 rank id, allgathered; "" when each rank got 0..n-1.
std::string AllgatherRanks(RankGroup& group) {
  const int n = group.size();
  std::vector<std::string> errors = OnEveryRank<std::string>(n, [&](int rank) -> std::string {
    Tensor mine(DType::kInt64, {1});
    *static_cast<int64_t*>(mine.data()) = rank;
    absl::StatusOr<Tensor> all = internal::Allgather(group.context(rank), mine.view());
    if (!all.ok()) return all.status().ToString();
    for (int r = 0; r < n; ++r) {
      const int64_t got = static_cast<const int64_t*>(all->data())[r];
      if (got != r) return absl::StrCat("rank ", rank, " got ", got, " at ", r);
    }
    // And a small allreduce, as a ring's host layout does next.
    Tensor one(DType::kInt32, {1});
    *static_cast<int32_t*>(one.data()) = 1;
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    if (absl::Status st = internal::Allreduce(group.context(rank), one.view(), sum); !st.ok()) {
      return st.ToString();
    }
    const int32_t total = *static_cast<const int32_t*>(one.data());
    return total == n ? "" : absl::StrCat("rank ", rank, " summed ", total);
  });
  for (const std::string& error : errors) {
    if (!error.empty()) return error;
  }
  return "";
}

TEST_CASE("a lazy ring connects its neighbours, then only the peers its collectives talk to",
          "[collectives][connect][lazy]") {
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 24;  // past kAllPeersMaxRanks: lazy
  RankGroup group(store, "lazy", kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    CHECK(ConnectedPeers(group.context(rank)) == Neighbours(rank, kRanks));
    CHECK(group.context(rank).connected_pairs() == 2);
  }

  // The dissemination barrier talks to rank +- 1, 2, 4, 8 and 16: never
  // to +- 3, say.
  std::vector<absl::Status> barriers = OnEveryRank<absl::Status>(
      kRanks, [&](int rank) { return internal::Barrier(group.context(rank)); });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    CHECK(barriers[rank].ok());
    std::set<int> expected;
    for (int distance : {1, 2, 4, 8, 16}) {
      expected.insert((rank + distance) % kRanks);
      expected.insert((rank + kRanks - distance) % kRanks);
    }
    CHECK(ConnectedPeers(group.context(rank)) == expected);
    CHECK_FALSE(group.context(rank).connected((rank + 3) % kRanks));
    CHECK_FALSE(group.context(rank).connected((rank + kRanks - 3) % kRanks));
  }

  // The allgather goes round the ring: nothing new (+-16 is -+8 at 24).
  CHECK(AllgatherRanks(group).empty());
  CHECK(group.context(0).connected_pairs() == 8);

  // An alltoall sends to every peer: now every pair is there, each
  // connected by both sides in that same collective.
  std::vector<std::string> errors = OnEveryRank<std::string>(kRanks, [&](int rank) -> std::string {
    Tensor rows(DType::kInt32, {kRanks});
    for (int r = 0; r < kRanks; ++r) static_cast<int32_t*>(rows.data())[r] = rank * 100 + r;
    std::vector<int64_t> received;
    absl::StatusOr<Tensor> got = internal::Alltoall(group.context(rank), rows.view(),
                                                    std::vector<int64_t>(kRanks, 1), &received);
    if (!got.ok()) return got.status().ToString();
    for (int r = 0; r < kRanks; ++r) {
      const int32_t value = static_cast<const int32_t*>(got->data())[r];
      if (value != r * 100 + rank) return absl::StrCat("rank ", rank, " got ", value, " from ", r);
    }
    return "";
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].empty());
    CHECK(group.context(rank).connected_pairs() == kRanks - 1);
  }
}

TEST_CASE("a lazy ring of up to 16 ranks connects every pair when it is built",
          "[collectives][connect][lazy]") {
  // Its collectives talk to every peer at once: one round trip for all.
  gloo::rendezvous::HashStore store;
  for (int ranks : {3, 8, internal::kAllPeersMaxRanks}) {
    RankGroup group(store, absl::StrCat("small", ranks), ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      CHECK(group.context(rank).connected_pairs() == ranks - 1);
    }
    CHECK(AllgatherRanks(group).empty());
  }
}

TEST_CASE("a reset at 64 in-process ranks connects every rank to its new neighbours only",
          "[collectives][connect][lazy]") {
  gloo::rendezvous::HashStore store;
  constexpr int kRanks = 64;
  const internal::RingConnectTotals before = internal::ProcessRingConnectTotals();
  {
    RankGroup first(store, "g1", kRanks);
    // The host layout's collectives (an allgather, a 4-byte allreduce) go
    // round the ring at this size.
    CHECK(AllgatherRanks(first).empty());
    for (int rank = 0; rank < kRanks; ++rank) {
      INFO("generation 1, rank " << rank);
      CHECK(ConnectedPeers(first.context(rank)) == Neighbours(rank, kRanks));
    }
    // A worker dies: the generation's rings are aborted.
    for (int rank = 0; rank < kRanks; ++rank) first.context(rank).Abort();
  }
  const internal::RingConnectTotals middle = internal::ProcessRingConnectTotals();
  CHECK(middle.pairs_connected - before.pairs_connected == 2 * kRanks);
  CHECK(middle.keys_read - before.keys_read == 2 * kRanks);

  // The next generation: the survivors (all but the old rank 63), ranked
  // again from 0, rebuild their ring under the generation's own prefix.
  constexpr int kSurvivors = kRanks - 1;
  RankGroup second(store, "g2", kSurvivors);
  CHECK(AllgatherRanks(second).empty());
  for (int rank = 0; rank < kSurvivors; ++rank) {
    INFO("generation 2, rank " << rank);
    CHECK(ConnectedPeers(second.context(rank)) == Neighbours(rank, kSurvivors));
  }
  // Two pairs and two keys per rank: nothing grows with the ring.
  const internal::RingConnectTotals after = internal::ProcessRingConnectTotals();
  CHECK(after.pairs_connected - middle.pairs_connected == 2 * kSurvivors);
  CHECK(after.keys_read - middle.keys_read == 2 * kSurvivors);
}

TEST_CASE("the record allgather gives every rank's record and talks to rank +- 2^k only",
          "[collectives][connect][lazy]") {
  gloo::rendezvous::HashStore store;
  for (int ranks : {2, 3, 5, internal::kAllPeersMaxRanks, 24, 37}) {
    RankGroup group(store, absl::StrCat("records", ranks), ranks);
    std::vector<std::string> errors = OnEveryRank<std::string>(ranks, [&](int rank) {
      const int64_t mine[2] = {rank, 1000 + rank};
      absl::StatusOr<std::vector<uint8_t>> all =
          internal::AllgatherRecords(group.context(rank), mine, sizeof(mine));
      if (!all.ok()) return all.status().ToString();
      if (all->size() != ranks * sizeof(mine)) return absl::StrCat("size ", all->size());
      for (int r = 0; r < ranks; ++r) {
        int64_t got[2];
        std::memcpy(got, all->data() + r * sizeof(got), sizeof(got));
        if (got[0] != r || got[1] != 1000 + r) {
          return absl::StrCat("rank ", rank, " got ", got[0], "/", got[1], " at ", r);
        }
      }
      return std::string();
    });
    for (int rank = 0; rank < ranks; ++rank) {
      INFO(ranks << " ranks, rank " << rank);
      CHECK(errors[rank].empty());
      if (ranks <= internal::kAllPeersMaxRanks) continue;  // connected in full when built
      // Past 16 ranks: its neighbours, and rank +- 2^k for 2^k < ranks.
      std::set<int> expected;
      for (int distance = 1; distance < ranks; distance *= 2) {
        expected.insert((rank + distance) % ranks);
        expected.insert((rank + ranks - distance) % ranks);
      }
      CHECK(ConnectedPeers(group.context(rank)) == expected);
      CHECK_FALSE(group.context(rank).connected((rank + 3) % ranks));
    }
  }
}

TEST_CASE("a lazy ring without eager pairs connects none until a collective talks to a peer",
          "[collectives][connect][lazy]") {
  // What a generation whose ranks all share one host builds: its collectives
  // run in shared memory, and a pair would only be CPU its reset waits for.
  gloo::rendezvous::HashStore store;
  for (int ranks : {4, 24}) {
    RankGroup group(store, absl::StrCat("noeager", ranks), ranks, testing::kCollectiveTimeout,
                    /*eager_pairs=*/false);
    for (int rank = 0; rank < ranks; ++rank) {
      INFO(ranks << " ranks, rank " << rank);
      CHECK(group.context(rank).connected_pairs() == 0);
      // Nor has it a Gloo device, whose I/O thread would wake every 10 ms.
      CHECK_FALSE(group.context(rank).device_started());
    }
    // A barrier over the ring then connects what it talks over (rank +- 2^k,
    // a dissemination barrier's), no more.
    const std::vector<std::string> barriers = OnEveryRank<std::string>(
        ranks, [&](int rank) { return internal::Barrier(group.context(rank)).ToString(); });
    CHECK(barriers == std::vector<std::string>(ranks, "OK"));
    for (int rank = 0; rank < ranks; ++rank) {
      INFO(ranks << " ranks, rank " << rank);
      std::set<int> expected;
      for (int distance = 1; distance < ranks; distance *= 2) {
        expected.insert((rank + distance) % ranks);
        expected.insert((rank + ranks - distance) % ranks);
      }
      CHECK(ConnectedPeers(group.context(rank)) == expected);
      CHECK(group.context(rank).device_started());
    }
  }
}

TEST_CASE("a lazy ring of two connects its one pair", "[collectives][connect][lazy]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "pair", 2);
  CHECK(group.context(0).connected_pairs() == 1);
  CHECK(group.context(1).connected_pairs() == 1);
  CHECK(AllgatherRanks(group).empty());
}

}  // namespace
}  // namespace horovodd
