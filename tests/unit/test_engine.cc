// The async engine over in-process rings: fused results equal unfused ones,
// requests match by name whatever order ranks enqueue them in, disagreeing
// ranks all get INVALID_ARGUMENT, a ring that dies fails every pending
// handle with ABORTED and the engine works again on a new ring.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "test_engine_support.h"
#include "worker_runtime/engine/engine_negotiation.h"

namespace horovodd {
namespace {

using testing::EngineGroup;
using testing::OnEveryRank;

// A mixed gradient set: sizes from 1 to ~5000 elements, every dtype.
struct Spec {
  std::string name;
  DType dtype;
  int64_t count;
};

std::vector<Spec> MixedSpecs(int how_many) {
  std::vector<Spec> specs;
  for (int i = 0; i < how_many; ++i) {
    const DType dtype = testing::kAllDTypes[i % std::size(testing::kAllDTypes)];
    specs.push_back(Spec{absl::StrCat("grad.", i), dtype, 1 + (i * 397) % 5000});
  }
  return specs;
}

// Small values every dtype holds exactly after summing a few ranks.
double Value(int rank, int tensor, int64_t i) { return (rank + 1) + (tensor + i) % 7; }

// Each rank enqueues every spec (in its own order), waits for all, and
// returns "" or the first wrong element.
std::vector<std::string> RunMixed(EngineGroup& group, const std::vector<Spec>& specs, ReduceOp op,
                                  bool reverse_odd_ranks) {
  return OnEveryRank<std::string>(group.size(), [&](int rank) -> std::string {
    std::vector<Tensor> tensors;
    for (size_t t = 0; t < specs.size(); ++t) {
      tensors.push_back(testing::MakeTensor(specs[t].dtype, {specs[t].count},
                                            [&](int64_t i) { return Value(rank, t, i); }));
    }
    std::vector<size_t> order(specs.size());
    for (size_t t = 0; t < order.size(); ++t) order[t] = t;
    if (reverse_odd_ranks && rank % 2 == 1) std::reverse(order.begin(), order.end());
    std::vector<Handle> handles(specs.size());
    AllreduceOptions options;
    options.op = op;
    for (size_t t : order) {
      absl::StatusOr<Handle> h = group.engine(rank).Enqueue(
          testing::AllreduceRequest(specs[t].name, {tensors[t].view()}, options), false);
      if (!h.ok()) return h.status().ToString();
      handles[t] = *h;
    }
    for (size_t t = 0; t < specs.size(); ++t) {
      if (absl::Status s = handles[t].Wait(absl::Seconds(120)); !s.ok()) return s.ToString();
      std::string wrong = testing::FirstMismatch(tensors[t], [&](int64_t i) {
        std::vector<double> values;
        for (int r = 0; r < group.size(); ++r) values.push_back(Value(r, t, i));
        return testing::Reduce(op, specs[t].dtype, values);
      });
      if (!wrong.empty()) return absl::StrCat(specs[t].name, ": ", wrong);
    }
    return "";
  });
}

TEST_CASE("fused allreduces of mixed sizes and dtypes equal the reduction", "[engine]") {
  for (int size : {2, 3}) {
    for (int64_t threshold : {int64_t{128} << 20, int64_t{0}, int64_t{4096}}) {
      EngineOptions options;
      options.fusion_threshold_bytes = threshold;
      EngineGroup group(size, options);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        INFO("size " << size << ", threshold " << threshold << ", op " << ReduceOpName(op));
        for (const std::string& result : RunMixed(group, MixedSpecs(40), op, false)) {
          CHECK(result == "");
        }
      }
    }
  }
}

TEST_CASE("ranks enqueuing in different orders still match by name", "[engine]") {
  EngineGroup group(3);
  for (int step = 0; step < 3; ++step) {  // later steps run from the response cache
    for (const std::string& result : RunMixed(group, MixedSpecs(25), ReduceOp::kSum, true)) {
      CHECK(result == "");
    }
  }
}

TEST_CASE("a tensor larger than the fusion threshold runs alone, correctly", "[engine]") {
  EngineOptions options;
  options.fusion_threshold_bytes = 1024;
  EngineGroup group(2, options);
  std::vector<Spec> specs = {{"small.0", DType::kFloat32, 10},
                             {"big", DType::kFloat32, 100000},
                             {"small.1", DType::kFloat32, 200}};
  for (const std::string& result : RunMixed(group, specs, ReduceOp::kSum, true)) {
    CHECK(result == "");
  }
}

TEST_CASE("prescale and postscale apply to fused tensors", "[engine]") {
  EngineGroup group(2);
  std::vector<std::string> results = OnEveryRank<std::string>(2, [&](int rank) -> std::string {
    std::vector<std::vector<double>> values(5, std::vector<double>(33, rank + 1.0));
    AllreduceOptions options;
    options.op = ReduceOp::kSum;
    options.prescale_factor = 2.0;
    options.postscale_factor = 0.25;
    std::vector<Handle> handles;
    for (int t = 0; t < 5; ++t) {
      handles.push_back(*group.engine(rank).Enqueue(
          testing::AllreduceRequest(absl::StrCat("scaled.", t), {ViewOf(values[t])}, options),
          false));
    }
    for (Handle& h : handles) {
      if (absl::Status s = h.Wait(); !s.ok()) return s.ToString();
    }
    // (1 + 2) * 2 * 0.25
    for (const auto& tensor : values) {
      for (double v : tensor) {
        if (v != 1.5) return absl::StrCat("got ", v, ", expected 1.5");
      }
    }
    return "";
  });
  for (const std::string& r : results) CHECK(r == "");
}

TEST_CASE("broadcasts fuse, allgathers and groups complete through handles", "[engine]") {
  EngineGroup group(3);
  std::vector<std::string> results = OnEveryRank<std::string>(3, [&](int rank) -> std::string {
    std::vector<float> a(10, rank), b(1000, rank);
    std::vector<int64_t> c(3, rank);
    std::vector<double> rows(2 * (rank + 1), rank);
    std::vector<float> g1(4, rank + 1), g2(5, rank + 1);
    internal::Engine& engine = group.engine(rank);
    Handle ha = *engine.Enqueue(testing::BroadcastRequest("a", ViewOf(a), 1), false);
    Handle hb = *engine.Enqueue(testing::BroadcastRequest("b", ViewOf(b), 1), false);
    Handle hc = *engine.Enqueue(testing::BroadcastRequest("c", ViewOf(c), 2), false);
    TensorView gathered_view = ViewOf(rows);
    gathered_view.shape = {rank + 1, 2};
    Handle hg = *engine.Enqueue(testing::AllgatherRequest("rows", gathered_view), false);
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    Handle hgroup =
        *engine.Enqueue(testing::AllreduceRequest("group", {ViewOf(g1), ViewOf(g2)}, sum), false);
    for (Handle* h : {&ha, &hb, &hc, &hgroup}) {
      if (absl::Status s = h->Wait(); !s.ok()) return s.ToString();
    }
    absl::StatusOr<Tensor> gathered = hg.TakeOutput();
    if (!gathered.ok()) return gathered.status().ToString();
    if (a[9] != 1 || b[999] != 1 || c[2] != 2) return "broadcast values wrong";
    if (g1[3] != 6 || g2[4] != 6) return "grouped allreduce values wrong";
    if (gathered->shape() != std::vector<int64_t>{6, 2}) return "allgather shape wrong";
    if (gathered->data_as<double>()[11] != 2) return "allgather values wrong";
    if (hg.TakeOutput().ok()) return "an output could be taken twice";
    return "";
  });
  for (const std::string& r : results) CHECK(r == "");
}

TEST_CASE("ranks that disagree on a tensor all get INVALID_ARGUMENT naming it", "[engine]") {
  EngineGroup group(3);
  std::vector<absl::Status> results = OnEveryRank<absl::Status>(3, [&](int rank) {
    std::vector<float> values(rank == 1 ? 4 : 3, 1.0f);
    absl::StatusOr<Handle> h =
        group.engine(rank).Enqueue(testing::AllreduceRequest("weights", {ViewOf(values)}), false);
    return h.ok() ? h->Wait() : h.status();
  });
  for (const absl::Status& s : results) {
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()),
               Catch::Contains("'weights'") && Catch::Contains("[3]") && Catch::Contains("[4]"));
  }
  // The ring is still good.
  std::vector<absl::Status> after = OnEveryRank<absl::Status>(3, [&](int rank) {
    std::vector<float> values(3, 1.0f);
    absl::StatusOr<Handle> h =
        group.engine(rank).Enqueue(testing::AllreduceRequest("weights", {ViewOf(values)}), false);
    return h.ok() ? h->Wait() : h.status();
  });
  for (const absl::Status& s : after) CHECK(s.ok());
}

TEST_CASE("a name already pending is refused", "[engine]") {
  EngineGroup group(1);
  std::vector<float> values(3, 1.0f);
  // Enqueued twice before the engine could run the first: one of the two
  // enqueues may come after the first completed, so only check the error.
  absl::StatusOr<Handle> first =
      group.engine(0).Enqueue(testing::AllreduceRequest("x", {ViewOf(values)}), false);
  REQUIRE(first.ok());
  absl::StatusOr<Handle> second =
      group.engine(0).Enqueue(testing::AllreduceRequest("x", {ViewOf(values)}), false);
  if (!second.ok()) {
    CHECK(second.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(second.status().message()), Catch::Contains("already pending"));
  }
  CHECK(first->Wait().ok());
}

TEST_CASE("an aborted ring fails every pending handle with ABORTED; a new ring works", "[engine]") {
  EngineGroup group(2);
  // Each rank waits on a name the other never sends: both sit in
  // negotiation rounds until rank 0's ring is aborted under them.
  std::vector<float> a(4, 1.0f), b(4, 1.0f);
  absl::StatusOr<Handle> on0 =
      group.engine(0).Enqueue(testing::AllreduceRequest("only.on.0", {ViewOf(a)}), true);
  absl::StatusOr<Handle> on1 =
      group.engine(1).Enqueue(testing::AllreduceRequest("only.on.1", {ViewOf(b)}), true);
  REQUIRE(on0.ok());
  REQUIRE(on1.ok());
  CHECK(on0->Wait(absl::Milliseconds(200)).code() == absl::StatusCode::kDeadlineExceeded);
  group.communicator(0).Abort();
  absl::Status s0 = on0->Wait(absl::Seconds(120));
  absl::Status s1 = on1->Wait(absl::Seconds(120));
  CHECK(s0.code() == absl::StatusCode::kAborted);
  CHECK(s1.code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(s0.message()), Catch::Contains("'only.on.0'"));
  // Until the next generation, requests are refused with ABORTED.
  absl::StatusOr<Handle> refused =
      group.engine(0).Enqueue(testing::AllreduceRequest("later", {ViewOf(a)}), false);
  CHECK(refused.status().code() == absl::StatusCode::kAborted);

  for (int r = 0; r < 2; ++r) group.Detach(r);
  group.Connect();
  std::vector<std::string> results = RunMixed(group, MixedSpecs(12), ReduceOp::kSum, true);
  for (const std::string& r : results) CHECK(r == "");
}

TEST_CASE("detaching fails pending handles with the given reason", "[engine]") {
  EngineGroup group(2);
  std::vector<float> a(4, 1.0f);
  absl::StatusOr<Handle> pending =
      group.engine(0).Enqueue(testing::AllreduceRequest("never", {ViewOf(a)}), false);
  REQUIRE(pending.ok());
  group.Detach(0);
  absl::Status s = pending->Wait(absl::Seconds(120));
  CHECK(s.code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(s.message()), Catch::Contains("the test detached the engine"));
  group.Detach(1);
}

TEST_CASE("threads waiting on their own handles all complete while peers lag", "[engine]") {
  // Rank 0: one thread per name, each waiting without a deadline (so each
  // may run rounds itself). Rank 1: the names one at a time, in reverse,
  // so rank 0's rounds keep leaving requests that are not ready yet.
  EngineGroup group(2);
  constexpr int kNames = 4;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::string> results = OnEveryRank<std::string>(2, [&](int rank) -> std::string {
      std::vector<std::vector<float>> values(kNames, std::vector<float>(16, rank + 1.0f));
      std::vector<std::string> errors(kNames);
      auto run_one = [&](int t) {
        absl::StatusOr<Handle> h = group.engine(rank).Enqueue(
            testing::AllreduceRequest(absl::StrCat("lagging.", t), {ViewOf(values[t])}), false);
        absl::Status s = h.ok() ? h->Wait() : h.status();
        if (!s.ok()) errors[t] = s.ToString();
      };
      if (rank == 0) {
        std::vector<std::thread> threads;
        for (int t = 0; t < kNames; ++t) threads.emplace_back(run_one, t);
        for (std::thread& thread : threads) thread.join();
      } else {
        for (int t = kNames - 1; t >= 0; --t) run_one(t);
      }
      for (int t = 0; t < kNames; ++t) {
        if (!errors[t].empty()) return errors[t];
        // The default op averages: (1 + 2) / 2.
        if (values[t][15] != 1.5f) return absl::StrCat("lagging.", t, " has ", values[t][15]);
      }
      return "";
    });
    for (const std::string& r : results) CHECK(r == "");
  }
}

TEST_CASE("a round where some ranks announce inline and others overflow agrees", "[engine]") {
  // Rank 0 announces 30 new names (too many for the first exchange's spare
  // room), rank 1 only one of them (inline); then both all 30, from cache
  // for the one and in full for the rest.
  EngineGroup group(2);
  std::vector<std::vector<float>> data(30, std::vector<float>(4, 1.0f));
  std::vector<internal::Request> requests;
  for (int t = 0; t < 30; ++t) {
    requests.push_back(
        testing::AllreduceRequest(absl::StrCat("a.long.gradient.name.", t), {ViewOf(data[t])}));
  }
  std::vector<internal::ResponseCache> caches(2);
  auto round = [&](int rank, size_t how_many) {
    std::vector<const internal::Request*> pending;
    for (size_t t = 0; t < how_many; ++t) pending.push_back(&requests[rank == 0 ? t : 29 - t]);
    return internal::Negotiate(*group.communicator(rank).negotiator(), pending, 1 << 20,
                               caches[rank]);
  };
  auto first = OnEveryRank<absl::StatusOr<internal::NegotiationResult>>(
      2, [&](int rank) { return round(rank, rank == 0 ? 30 : 1); });
  for (const auto& r : first) {
    REQUIRE(r.ok());
    CHECK(r->ready == std::vector<std::string>{"a.long.gradient.name.29"});
  }
  auto second = OnEveryRank<absl::StatusOr<internal::NegotiationResult>>(
      2, [&](int rank) { return round(rank, 30); });
  for (const auto& r : second) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 30);
    CHECK(r->ready == second[0]->ready);
  }
  CHECK(caches[0].size() == 30);
  CHECK(caches[1].size() == 30);
  for (size_t slot = 0; slot < 30; ++slot) {
    CHECK(caches[0].slot(slot).name == caches[1].slot(slot).name);
  }
}

TEST_CASE("announcements past a part's room take the second exchange, on either way", "[engine]") {
  // 400 names of about 100 bytes: more than a shared-memory part holds
  // (NegotiationChannel::kPartBytes), and than the ring's spare room. Rank 1
  // has them in reverse order; all are ready, in the same order everywhere.
  EngineGroup group(3);
  std::vector<std::vector<float>> data(400, std::vector<float>(2, 1.0f));
  std::vector<internal::Request> requests;
  for (int t = 0; t < 400; ++t) {
    requests.push_back(
        testing::AllreduceRequest(absl::StrCat(std::string(90, 'n'), ".", t), {ViewOf(data[t])}));
  }
  std::vector<internal::ResponseCache> caches(3);
  auto results = OnEveryRank<absl::StatusOr<internal::NegotiationResult>>(3, [&](int rank) {
    std::vector<const internal::Request*> pending;
    for (int t = 0; t < 400; ++t) pending.push_back(&requests[rank == 1 ? 399 - t : t]);
    return internal::Negotiate(*group.communicator(rank).negotiator(), pending, 1 << 20,
                               caches[rank]);
  });
  for (const auto& r : results) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 400);
    CHECK(r->ready == results[0]->ready);
  }
  CHECK(caches[2].size() == 400);
}

TEST_CASE("where rank 0 decides for the host, every rank has the same rounds and caches",
          "[engine]") {
  EngineGroup group(3, {}, /*rank_zero_decides_from=*/2);
  if (!group.in_shared_memory()) return;  // test_engine_tcp: every rank decides
  for (int r = 0; r < 3; ++r) CHECK(group.communicator(r).negotiator()->decider() == 0);
  std::vector<float> small(4, 1.0f), other(6, 1.0f);
  const internal::Request a = testing::AllreduceRequest("a", {ViewOf(small)});
  const internal::Request b = testing::AllreduceRequest("b", {ViewOf(small)});
  const internal::Request c = testing::AllreduceRequest("c", {ViewOf(small)});
  const internal::Request c_other = testing::AllreduceRequest("c", {ViewOf(other)});
  std::vector<internal::ResponseCache> caches(3);
  const auto round = [&](const std::function<std::vector<const internal::Request*>(int)>& pending) {
    return OnEveryRank<absl::StatusOr<internal::NegotiationResult>>(3, [&](int rank) {
      return internal::Negotiate(*group.communicator(rank).negotiator(), pending(rank), 1 << 20,
                                 caches[rank]);
    });
  };
  const auto same_caches = [&] {
    for (int r = 1; r < 3; ++r) {
      REQUIRE(caches[r].size() == caches[0].size());
      for (size_t slot = 0; slot < caches[0].size(); ++slot) {
        CHECK(caches[r].slot(slot).name == caches[0].slot(slot).name);
        CHECK(caches[r].slot(slot).descriptor == caches[0].slot(slot).descriptor);
      }
    }
  };
  // Rank 2 lacks "b": "a" is ready (and cached), "b" waits for rank 2 on every rank.
  const auto first = round([&](int rank) {
    return rank == 2 ? std::vector<const internal::Request*>{&a}
                     : std::vector<const internal::Request*>{&a, &b};
  });
  for (const auto& r : first) {
    REQUIRE(r.ok());
    CHECK(r->ready == std::vector<std::string>{"a"});
    CHECK(r->waiting == std::map<std::string, std::vector<int>>{{"b", {2}}});
    CHECK(r->fusion_threshold == 1 << 20);
  }
  CHECK(caches[0].size() == 1);
  same_caches();
  // "a" from the cache, "b" now everywhere, "c" enqueued differently by rank 1.
  const auto second = round([&](int rank) {
    return std::vector<const internal::Request*>{&a, &b, rank == 1 ? &c_other : &c};
  });
  for (const auto& r : second) {
    REQUIRE(r.ok());
    CHECK(r->ready == std::vector<std::string>{"a", "b"});
    REQUIRE(r->conflicts.size() == 1);
    CHECK(r->conflicts[0].name == "c");
    CHECK(r->conflicts[0].message == second[0]->conflicts[0].message);
    CHECK(r->conflicts[0].message.find("rank 1 has") != std::string::npos);
    CHECK(r->waiting.empty());
  }
  CHECK(caches[0].size() == 2);
  same_caches();
  // 150 names of about 100 bytes fit every rank's part, but a result that
  // caches and names them all does not fit rank 0's room: the ranks decide
  // from the parts, and still agree.
  std::vector<internal::Request> many;
  for (int t = 0; t < 150; ++t) {
    many.push_back(
        testing::AllreduceRequest(absl::StrCat(std::string(95, 'm'), ".", t), {ViewOf(small)}));
  }
  const auto third = round([&](int rank) {
    std::vector<const internal::Request*> pending;
    for (int t = 0; t < 150; ++t) pending.push_back(&many[rank == 1 ? 149 - t : t]);
    return pending;
  });
  for (const auto& r : third) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 150);
    CHECK(r->ready == third[0]->ready);
  }
  CHECK(caches[0].size() == 152);
  same_caches();
  // And then from the cache alone: one bit each, decided by rank 0.
  const auto fourth = round([&](int) {
    std::vector<const internal::Request*> pending{&a};
    for (const internal::Request& m : many) pending.push_back(&m);
    return pending;
  });
  for (const auto& r : fourth) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 151);
  }
  same_caches();
}

TEST_CASE("negotiation rounds on one ring must share a response cache", "[engine]") {
  // Over the ring each round posts the next one's receives, sized from the
  // cache; a round with a cache of another size is refused on every rank,
  // and the ring keeps working with the right one. (In shared memory parts
  // are not sized ahead: the test_engine_tcp run checks this.)
  EngineGroup group(2);
  if (group.in_shared_memory()) return;
  std::vector<std::vector<float>> data(20, std::vector<float>(4, 1.0f));
  std::vector<internal::Request> requests;
  for (int t = 0; t < 20; ++t) {
    requests.push_back(testing::AllreduceRequest(absl::StrCat("w", t), {ViewOf(data[t])}));
  }
  std::vector<const internal::Request*> pending;
  for (const internal::Request& r : requests) pending.push_back(&r);
  std::vector<internal::ResponseCache> caches(2), strangers(2);
  auto round = [&](std::vector<internal::ResponseCache>& with) {
    return OnEveryRank<absl::StatusOr<internal::NegotiationResult>>(2, [&](int rank) {
      return internal::Negotiate(*group.communicator(rank).negotiator(), pending, 1 << 20,
                                 with[rank]);
    });
  };
  for (const auto& r : round(caches)) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 20);
  }
  for (const auto& r : round(strangers)) {
    CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(r.status().message().find("same ResponseCache") != std::string::npos);
  }
  for (const auto& r : round(caches)) {
    REQUIRE(r.ok());
    CHECK(r->ready.size() == 20);
  }
}

TEST_CASE("the response cache keeps slots stable and starts over when full", "[engine]") {
  internal::ResponseCache cache;
  cache.Record("a", "d1");
  cache.Record("b", "d2");
  CHECK(cache.Find("a", "d1") == std::optional<size_t>(0));
  CHECK(cache.Find("b", "d2") == std::optional<size_t>(1));
  CHECK_FALSE(cache.Find("a", "other").has_value());
  cache.Record("a", "d3");  // a new shape for an old name keeps its slot
  CHECK(cache.Find("a", "d3") == std::optional<size_t>(0));
  for (size_t i = 0; i < internal::ResponseCache::kCapacity; ++i) {
    cache.Record(absl::StrCat("n", i), "d");
  }
  CHECK(cache.size() <= internal::ResponseCache::kCapacity);
}

}  // namespace
}  // namespace horovodd

namespace horovodd {
namespace {

// Not run by default ([.]): prints how long 100 small allreduces take per
// step through the engine, fused, at 2 ranks. Never asserts a time.
TEST_CASE("timing: 100 tensors of 1024 floats per step", "[.][engine-timing]") {
  testing::EngineGroup group(2);
  constexpr int kSteps = 50;
  std::vector<double> per_step_ms = OnEveryRank<double>(2, [&](int rank) {
    std::vector<std::vector<float>> grads(100, std::vector<float>(1024, rank));
    absl::Time start;
    for (int step = -5; step < kSteps; ++step) {  // 5 warm-up steps
      if (step == 0) start = absl::Now();
      std::vector<Handle> handles;
      for (int t = 0; t < 100; ++t) {
        handles.push_back(*group.engine(rank).Enqueue(
            testing::AllreduceRequest(absl::StrCat("g", t), {ViewOf(grads[t])}), false));
      }
      for (Handle& h : handles) h.Wait().IgnoreError();
    }
    return absl::ToDoubleMilliseconds(absl::Now() - start) / kSteps;
  });
  // The same step as 100 separate allreduces straight on the ring.
  std::vector<double> unfused_ms = OnEveryRank<double>(2, [&](int rank) {
    std::vector<std::vector<float>> grads(100, std::vector<float>(1024, rank));
    absl::Time start;
    for (int step = -5; step < kSteps; ++step) {
      if (step == 0) start = absl::Now();
      for (int t = 0; t < 100; ++t) {
        group.communicator(rank).Allreduce(ViewOf(grads[t]), {}).IgnoreError();
      }
    }
    return absl::ToDoubleMilliseconds(absl::Now() - start) / kSteps;
  });
  WARN("fused step: " << per_step_ms[0] << " ms, 100 separate allreduces: " << unfused_ms[0]
                      << " ms (rank 0)");
}

// Not run by default ([.]): prints the cost of one synchronous call (an urgent
// request, waited on at once, as horovodd::Allreduce does) beside the same
// allreduce straight on the ring, at 4 KiB and 1 MiB. Never asserts a time.
TEST_CASE("timing: one synchronous allreduce per call", "[.][engine-timing]") {
  testing::EngineGroup group(2);
  for (int64_t floats : {int64_t{1024}, int64_t{1} << 18}) {
    const int calls = floats > 4096 ? 50 : 500;
    // `drive`: the caller waits without a deadline, as synchronous calls
    // do, and so runs the round itself; otherwise (a deadline) the engine
    // thread runs it and wakes the caller.
    auto through_engine = [&](bool drive) {
      return OnEveryRank<double>(2, [&](int rank) {
        std::vector<float> data(floats, rank);
        const absl::Duration timeout = drive ? absl::InfiniteDuration() : absl::Hours(1);
        absl::Time start;
        for (int i = -10; i < calls; ++i) {  // 10 warm-up calls
          if (i == 0) start = absl::Now();
          group.engine(rank)
              .Enqueue(testing::AllreduceRequest("sync", {ViewOf(data)}), drive)
              ->Wait(timeout)
              .IgnoreError();
        }
        return absl::ToDoubleMilliseconds(absl::Now() - start) / calls;
      });
    };
    std::vector<double> engine_ms = through_engine(true);
    std::vector<double> handoff_ms = through_engine(false);
    std::vector<double> ring_ms = OnEveryRank<double>(2, [&](int rank) {
      std::vector<float> data(floats, rank);
      absl::Time start;
      for (int i = -10; i < calls; ++i) {
        if (i == 0) start = absl::Now();
        group.communicator(rank).Allreduce(ViewOf(data), {}).IgnoreError();
      }
      return absl::ToDoubleMilliseconds(absl::Now() - start) / calls;
    });
    WARN(floats * 4 << " bytes, ms per call on rank 0: " << engine_ms[0]
                    << " synchronous (the caller runs the round), " << handoff_ms[0]
                    << " run by the engine thread, " << ring_ms[0] << " straight on the ring");
  }
}
}  // namespace
}  // namespace horovodd
