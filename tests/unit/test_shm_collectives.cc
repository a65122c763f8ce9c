// Collectives through the communicators comm_factory/ chooses for rings
// whose ranks share a host: every op in shared memory (or, over two
// simulated hosts, the hierarchical allreduce), which must give the same
// bytes as the same op on a plain TCP ring. Ranks are threads; the "hosts"
// are sets of them with their own segments.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/strings/str_cat.h"
#include "shm_test_support.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/gloo/gloo_ops.h"
#include "worker_runtime/hierarchical/hierarchical_communicator.h"
#include "worker_runtime/shm_comm/shm_communicator.h"

namespace horovodd {
namespace {

using internal::Communicator;
using internal::HierarchicalAllreduce;
using internal::LocalOptions;
using testing::AllLocal;
using testing::Comms;
using testing::Connected;
using testing::ConnectEveryRank;
using testing::ConnectLocal;
using testing::MakeTensor;
using testing::OnEveryRank;
using testing::RankGroup;

double Value(int rank, int64_t i) { return static_cast<double>((rank + i) % 3 + 1); }

// The ring's own communicators: everything over TCP.
Comms OverTcp(RankGroup& group) {
  Comms comms;
  for (int r = 0; r < group.size(); ++r) {
    comms.push_back(std::make_shared<internal::GlooCommunicator>(group.shared(r)));
  }
  return comms;
}

// An allreduce of `bytes` goes hierarchical.
bool Hierarchical(const Communicator& comm, size_t bytes) {
  const auto* hierarchical = dynamic_cast<const internal::HierarchicalCommunicator*>(&comm);
  return hierarchical != nullptr && hierarchical->CrossesHostsFor(bytes);
}

std::string Bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.data()), t.nbytes());
}

// Every collective once, on every rank; each rank's results as bytes.
std::vector<std::string> RunAll(const Comms& comms, DType dtype, ReduceOp op, int64_t count) {
  const int n = static_cast<int>(comms.size());
  return OnEveryRank<std::string>(n, [&](int rank) -> std::string {
    Communicator& c = *comms[rank];
    std::string out;
    auto fail = [](const char* what, const absl::Status& s) {
      return absl::StrCat("FAILED ", what, ": ", s.ToString());
    };
    Tensor reduced = MakeTensor(dtype, {count}, [&](int64_t i) { return Value(rank, i); });
    AllreduceOptions options;
    options.op = op;
    if (op == ReduceOp::kSum) {
      options.prescale_factor = 2.0;
      options.postscale_factor = 0.5;
    }
    if (absl::Status s = c.Allreduce(reduced.view(), options); !s.ok()) {
      return fail("allreduce", s);
    }
    out += Bytes(reduced);
    if (op != ReduceOp::kSum) return out;  // the other ops only reduce
    Tensor part =
        MakeTensor(dtype, {rank + 1, count / 4 + 1}, [&](int64_t i) { return Value(rank, i); });
    auto gathered = c.Allgather(part.view());
    if (!gathered.ok()) return fail("allgather", gathered.status());
    out += Bytes(*gathered);
    Tensor b = MakeTensor(dtype, {count}, [&](int64_t i) { return Value(rank, i); });
    if (absl::Status s = c.Broadcast(b.view(), n - 1); !s.ok()) {
      return fail("broadcast", s);
    }
    out += Bytes(b);
    std::vector<int64_t> splits;
    int64_t rows = 0;
    for (int d = 0; d < n; ++d) {
      splits.push_back((count / 8 + 1) * (d + 1) + rank);
      rows += splits.back();
    }
    Tensor a = MakeTensor(dtype, {rows}, [&](int64_t i) { return Value(rank, i); });
    std::vector<int64_t> received;
    auto exchanged = c.Alltoall(a.view(), splits, &received);
    if (!exchanged.ok()) return fail("alltoall", exchanged.status());
    out += Bytes(*exchanged);
    Tensor rs = MakeTensor(dtype, {count + 3}, [&](int64_t i) { return Value(rank, i); });
    auto scattered = c.Reducescatter(rs.view(), {ReduceOp::kSum, 2.0, 1.0});
    if (!scattered.ok()) return fail("reducescatter", scattered.status());
    out += Bytes(*scattered);
    if (absl::Status s = c.Barrier(); !s.ok()) return fail("barrier", s);
    return out;
  });
}

TEST_CASE("every collective in shared memory gives the TCP ring's bytes", "[shm]") {
  gloo::rendezvous::HashStore store;
  for (const int size : {2, 3, 4}) {
    RankGroup tcp_ring(store, absl::StrCat("tcp", size), size);
    RankGroup shm_ring(store, absl::StrCat("shm", size), size);
    const Comms tcp = OverTcp(tcp_ring);
    // 64 KiB slots: the larger tensors take many rounds.
    const Comms shm = ConnectLocal(shm_ring, 1, HierarchicalAllreduce::kAuto, 64 << 10);
    for (int r = 0; r < size; ++r) REQUIRE(AllLocal(*shm[r]));
    for (const DType dtype : testing::kAllDTypes) {
      for (const ReduceOp op : testing::kAllReduceOps) {
        for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{600000}}) {
          if (op != ReduceOp::kSum && count > 1000) continue;
          INFO("size " << size << ", " << DTypeName(dtype) << ", " << ReduceOpName(op) << ", "
                       << count << " elements");
          const std::vector<std::string> want = RunAll(tcp, dtype, op, count);
          const std::vector<std::string> got = RunAll(shm, dtype, op, count);
          for (int r = 0; r < size; ++r) {
            REQUIRE(want[r].rfind("FAILED", 0) != 0);
            CHECK(got[r] == want[r]);
          }
        }
      }
    }
  }
}

// The engine's fused batches: parts of one dtype, some empty, some
// straddling the 64 KiB rounds.
TEST_CASE("an allreduce of separate parts in shared memory gives the packed tensor's bytes",
          "[shm]") {
  gloo::rendezvous::HashStore store;
  const std::vector<int64_t> counts = {0, 1, 1000, 0, 70000, 3, 16385, 0};
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  for (const int size : {2, 3, 4}) {
    RankGroup tcp(store, absl::StrCat("ptcp", size), size);
    RankGroup shm_ring(store, absl::StrCat("pshm", size), size);
    const Comms shm = ConnectLocal(shm_ring, 1, HierarchicalAllreduce::kAuto, 64 << 10);
    for (const DType dtype : testing::kAllDTypes) {
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        INFO("size " << size << ", " << DTypeName(dtype) << ", " << ReduceOpName(op));
        AllreduceOptions options;
        options.op = op;
        options.prescale_factor = op == ReduceOp::kSum ? 2.0 : 1.0;
        const auto want = OnEveryRank<std::string>(size, [&](int rank) {
          Tensor packed = MakeTensor(dtype, {total}, [&](int64_t i) { return Value(rank, i); });
          absl::Status s = internal::Allreduce(tcp.context(rank), packed.view(), options);
          return s.ok() ? Bytes(packed) : s.ToString();
        });
        const auto got = OnEveryRank<std::string>(size, [&](int rank) {
          Communicator& c = *shm[rank];
          if (!AllLocal(c)) return std::string("not all local");
          std::vector<Tensor> parts;
          int64_t at = 0;
          for (int64_t count : counts) {
            parts.push_back(
                MakeTensor(dtype, {count}, [&](int64_t i) { return Value(rank, at + i); }));
            at += count;
          }
          std::vector<TensorView> views;
          for (Tensor& t : parts) views.push_back(t.view());
          if (absl::Status s = c.AllreduceParts(views, options); !s.ok()) {
            return s.ToString();
          }
          std::string out;
          for (const Tensor& t : parts) out += Bytes(t);
          return out;
        });
        for (int r = 0; r < size; ++r) {
          REQUIRE(want[r].size() == static_cast<size_t>(total) * DTypeSize(dtype));
          CHECK(got[r] == want[r]);
        }
      }
    }
  }
}

TEST_CASE("an allreduce of parts refuses mixed dtypes on every rank, and TCP rings", "[shm]") {
  gloo::rendezvous::HashStore store;
  RankGroup shm_ring(store, "pmixed", 2);
  const Comms shm = ConnectLocal(shm_ring, 1, HierarchicalAllreduce::kAuto, 64 << 10);
  const auto errors = OnEveryRank<std::string>(2, [&](int rank) {
    Tensor a = MakeTensor(DType::kFloat32, {4}, [](int64_t) { return 1.0; });
    Tensor b = MakeTensor(DType::kInt32, {4}, [](int64_t) { return 1.0; });
    AllreduceOptions options;
    options.name = "grads";
    return shm[rank]->AllreduceParts({a.view(), b.view()}, options).ToString();
  });
  for (const std::string& e : errors) {
    CHECK(e ==
          "INVALID_ARGUMENT: allreduce 'grads': fused tensors must share one dtype, got "
          "float32 and int32");
  }
  // A bad argument leaves the group usable.
  const auto after = OnEveryRank<std::string>(2, [&](int rank) {
    Tensor t = MakeTensor(DType::kFloat32, {4}, [&](int64_t) { return rank + 1.0; });
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    absl::Status s = shm[rank]->AllreduceParts({t.view()}, sum);
    return s.ok() ? absl::StrCat(t.data_as<float>()[0]) : s.ToString();
  });
  for (const std::string& a : after) CHECK(a == "3");
  RankGroup tcp_ring(store, "ptcp-refused", 2);
  const Comms tcp = OverTcp(tcp_ring);
  const auto refused = OnEveryRank<std::string>(2, [&](int rank) {
    Tensor t = MakeTensor(DType::kFloat32, {4}, [](int64_t) { return 1.0; });
    return tcp[rank]->AllreduceParts({t.view()}, {}).ToString();
  });
  for (const std::string& r : refused) {
    CHECK(r.rfind("FAILED_PRECONDITION: allreduce: an allreduce of separate parts", 0) == 0);
  }
}

TEST_CASE("the hierarchical allreduce over two hosts gives the TCP ring's bytes", "[shm]") {
  gloo::rendezvous::HashStore store;
  // 3 per host: parts of unequal length, and a rank's own copy folded
  // first is not rank order.
  for (const int per_host : {1, 2, 3}) {
    const int size = 2 * per_host;
    RankGroup tcp_ring(store, absl::StrCat("tcp", size), size);
    RankGroup hier_ring(store, absl::StrCat("hier", size), size);
    const Comms tcp = OverTcp(tcp_ring);
    Comms hier = OverTcp(hier_ring);
    if (per_host > 1) {
      hier = ConnectLocal(hier_ring, 2, HierarchicalAllreduce::kOn, 64 << 10);
      for (int r = 0; r < size; ++r) {
        REQUIRE(!AllLocal(*hier[r]));
        REQUIRE(Hierarchical(*hier[r], 4));
      }
    }
    for (const DType dtype : testing::kAllDTypes) {
      for (const ReduceOp op : testing::kAllReduceOps) {
        for (const int64_t count :
             {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{300000}}) {
          if (op != ReduceOp::kSum && count > 1000) continue;
          INFO(per_host << " ranks per host, " << DTypeName(dtype) << ", " << ReduceOpName(op)
                        << ", " << count << " elements");
          const std::vector<std::string> want = RunAll(tcp, dtype, op, count);
          const std::vector<std::string> got = RunAll(hier, dtype, op, count);
          for (int r = 0; r < size; ++r) {
            REQUIRE(want[r].rfind("FAILED", 0) != 0);
            CHECK(got[r] == want[r]);
          }
        }
      }
    }
  }
}

// From 8 MiB the tensor crosses hosts in pieces (up to 4), each crossing
// in flight while the next piece is reduced within the host.
TEST_CASE("the hierarchical allreduce in pieces gives the TCP ring's bytes", "[shm]") {
  gloo::rendezvous::HashStore store;
  for (const int per_host : {2, 3}) {
    const int size = 2 * per_host;
    RankGroup tcp_ring(store, absl::StrCat("tcp-pieces", size), size);
    RankGroup hier_ring(store, absl::StrCat("hier-pieces", size), size);
    const Comms tcp = OverTcp(tcp_ring);
    const Comms hier = ConnectLocal(hier_ring, 2, HierarchicalAllreduce::kOn, 256 << 10);
    // 2 pieces, 4 pieces, and 4 of unequal length (16 MiB + 3 elements).
    for (const int64_t count : {int64_t{2} << 20, int64_t{4} << 20, (int64_t{4} << 20) + 3}) {
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        INFO(per_host << " ranks per host, " << ReduceOpName(op) << ", " << count << " elements");
        auto allreduce = [&](const Comms& group) {
          return OnEveryRank<std::string>(size, [&](int rank) -> std::string {
            Tensor t = MakeTensor(DType::kFloat32, {count},
                                  [&](int64_t i) { return Value(rank, i) + 0.25 * (i % 5); });
            AllreduceOptions options;
            options.op = op;
            options.postscale_factor = 0.5;
            absl::Status s = group[rank]->Allreduce(t.view(), options);
            return s.ok() ? Bytes(t) : "FAILED " + s.ToString();
          });
        };
        const std::vector<std::string> want = allreduce(tcp);
        const std::vector<std::string> got = allreduce(hier);
        for (int r = 0; r < size; ++r) {
          REQUIRE(want[r].rfind("FAILED", 0) != 0);
          CHECK(got[r] == want[r]);
        }
      }
    }
  }
}

// Process sets: a set's ring gets groups of its own, placed from where the
// global ring's ranks are (SubsetPlaces), and its collectives give the TCP
// ring's bytes.
TEST_CASE("a process set's ring shares memory among its members on each host", "[shm]") {
  gloo::rendezvous::HashStore store;
  struct Case {
    int hosts;
    std::vector<int> members;
    std::vector<int> want_local_size;  // by set rank
    std::vector<bool> want_group;      // by set rank: in a shared-memory group
    bool all_local;
  };
  const Case cases[] = {
      {1, {0, 1, 3}, {3, 3, 3}, {true, true, true}, true},
      // One member on host 0, two on host 1.
      {2, {1, 2, 3}, {1, 2, 2}, {false, true, true}, false},
      {2, {0, 2}, {1, 1}, {false, false}, false},  // one on each: no group anywhere
  };
  int k = 0;
  for (const Case& c : cases) {
    INFO("hosts " << c.hosts << ", case " << k);
    RankGroup global(store, absl::StrCat("global", k), 4);
    const int per_host = 4 / c.hosts;
    const std::vector<Connected> global_connected = ConnectEveryRank(global, [&](int rank) {
      LocalOptions options;
      options.local_rank = rank % per_host;
      options.local_size = per_host;
      options.cross_rank = rank / per_host;
      return options;
    });
    std::vector<std::vector<int>> host_of_rank;
    for (const Connected& g : global_connected) host_of_rank.push_back(g.host_of_rank);
    for (int r = 0; r < 4; ++r) {
      std::vector<int> want;
      for (int q = 0; q < 4; ++q) want.push_back(q / per_host);
      REQUIRE(host_of_rank[r] == want);
    }
    const int n = static_cast<int>(c.members.size());
    RankGroup tcp_ring(store, absl::StrCat("settcp", k), n);
    RankGroup set_ring(store, absl::StrCat("set", k), n);
    const Comms tcp = OverTcp(tcp_ring);
    std::vector<LocalOptions> places;
    for (int set_rank = 0; set_rank < n; ++set_rank) {
      places.push_back(internal::SubsetPlaces(host_of_rank[c.members[set_rank]], c.members,
                                              set_rank, LocalOptions{}));
      REQUIRE(places.back().local_size == c.want_local_size[set_rank]);
    }
    const std::vector<Connected> connected =
        ConnectEveryRank(set_ring, [&](int set_rank) { return places[set_rank]; });
    Comms set;
    for (const Connected& s : connected) {
      REQUIRE(s.status == "OK");
      set.push_back(s.comm);
    }
    for (int r = 0; r < n; ++r) {
      CHECK(connected[r].has_group == c.want_group[r]);
      CHECK(AllLocal(*set[r]) == c.all_local);
    }
    for (const DType dtype : {DType::kFloat32, DType::kInt64}) {
      for (const int64_t count : {int64_t{1}, int64_t{1000}, int64_t{100000}}) {
        INFO(DTypeName(dtype) << ", " << count << " elements");
        const std::vector<std::string> want = RunAll(tcp, dtype, ReduceOp::kSum, count);
        const std::vector<std::string> got = RunAll(set, dtype, ReduceOp::kSum, count);
        for (int r = 0; r < n; ++r) {
          REQUIRE(want[r].rfind("FAILED", 0) != 0);
          CHECK(got[r] == want[r]);
        }
      }
    }
    ++k;
  }
}

TEST_CASE("the automatic choice goes hierarchical from 64 KiB, and =0 never", "[shm]") {
  gloo::rendezvous::HashStore store;
  for (const auto mode : {HierarchicalAllreduce::kAuto, HierarchicalAllreduce::kOff}) {
    RankGroup ring(store, absl::StrCat("choice", static_cast<int>(mode)), 4);
    const Comms group = ConnectLocal(ring, 2, mode, 64 << 10);
    const size_t at = internal::kHierarchicalAutoMinBytes;
    const bool on = mode == HierarchicalAllreduce::kAuto;
    CHECK(Hierarchical(*group[0], at) == on);
    CHECK_FALSE(Hierarchical(*group[0], at - 4));
  }
}

// Pairwise would send every rank's share to every rank of the other hosts
// (at 2 x 2 ranks 2 tensors each way between the hosts, the ring 1.5; at L
// ranks per host L against 2); tests/integration/test_hierarchical_link.py
// counts those bytes on a link.
TEST_CASE("across hosts with several ranks each the flat allreduce takes the ring", "[shm]") {
  gloo::rendezvous::HashStore store;
  struct Layout {
    int hosts;
    bool shm;
    bool spans;
  };
  for (const Layout layout : {Layout{2, true, true}, Layout{2, false, true}, Layout{4, true, false},
                              Layout{1, false, false}}) {
    INFO(layout.hosts << " hosts, shared memory " << (layout.shm ? "on" : "off"));
    const int size = 4;
    const int per_host = size / layout.hosts;
    RankGroup group(store, absl::StrCat("flat", layout.hosts, layout.shm), size);
    RankGroup tcp_ring(store, absl::StrCat("flat-tcp", layout.hosts, layout.shm), size);
    const Comms tcp = OverTcp(tcp_ring);
    const std::vector<Connected> connected = ConnectEveryRank(group, [&](int rank) {
      LocalOptions options;
      options.enabled = layout.shm;
      options.local_rank = rank % per_host;
      options.local_size = per_host;
      options.cross_rank = rank / per_host;
      options.hierarchical = HierarchicalAllreduce::kOff;
      return options;
    });
    Comms comms;
    for (const Connected& c : connected) {
      REQUIRE(c.status == "OK");
      comms.push_back(c.comm);
    }
    // 400,000 floats: pairwise at 4 ranks on one host or one rank per host.
    std::vector<float> medium(400000);
    for (int r = 0; r < size; ++r) {
      CHECK(group.context(r).spans_hosts_with_peers() == layout.spans);
      CHECK(internal::AllreduceConfirmsItself(group.context(r), ViewOf(medium), {}) ==
            !layout.spans);
    }
    const std::vector<std::string> want = RunAll(tcp, DType::kFloat32, ReduceOp::kSum, 400000);
    const std::vector<std::string> got = RunAll(comms, DType::kFloat32, ReduceOp::kSum, 400000);
    for (int r = 0; r < size; ++r) {
      REQUIRE(want[r].rfind("FAILED", 0) != 0);
      CHECK(got[r] == want[r]);
    }
  }
}

TEST_CASE("aborting a ring wakes its ranks waiting in shared memory", "[shm]") {
  gloo::rendezvous::HashStore store;
  RankGroup ring(store, "abort", 2);
  const Comms group = ConnectLocal(ring, 1, HierarchicalAllreduce::kAuto, 64 << 10);
  // Rank 0 waits in a barrier rank 1 never enters; the abort ends it.
  const auto codes = OnEveryRank<int>(2, [&](int rank) {
    if (rank == 1) {
      group[1]->Abort();
      return static_cast<int>(absl::StatusCode::kAborted);
    }
    return static_cast<int>(group[0]->Barrier().code());
  });
  CHECK(codes[0] == static_cast<int>(absl::StatusCode::kAborted));
  // Dead on both ranks from now on.
  CHECK_FALSE(group[1]->Barrier().ok());
}

}  // namespace
}  // namespace horovodd
