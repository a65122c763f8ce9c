// The engine's speculative allreduce (engine_speculation.h) over in-process
// rings, on a copy and in band: a repeated synchronous allreduce is
// predicted and its results stay exact; a wrong guess (a new shape, a
// different tensor, ranks that disagree on what comes next) is thrown away
// and the round runs as usual.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "test_engine_support.h"
#include "worker_runtime/engine/engine_speculation.h"

namespace horovodd {
namespace {

using testing::EngineGroup;
using testing::OnEveryRank;

AllreduceOptions Sum() {
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  return options;
}

// Rank r's value for element i at `step`: small integers, exact in float.
float Value(int rank, int step, int64_t i) {
  return static_cast<float>((rank + 1) * (step % 5 + 1) + i % 3);
}

float Expected(int size, int step, int64_t i) {
  float sum = 0;
  for (int r = 0; r < size; ++r) sum += Value(r, step, i);
  return sum;
}

// One synchronous (urgent, waited at once) allreduce of `name` with
// `elements` floats at `step`; "" or what was wrong.
std::string SyncStep(EngineGroup& group, int rank, const std::string& name, int64_t elements,
                     int step) {
  std::vector<float> data(elements);
  for (int64_t i = 0; i < elements; ++i) data[i] = Value(rank, step, i);
  absl::StatusOr<Handle> h =
      group.engine(rank).Enqueue(testing::AllreduceRequest(name, {ViewOf(data)}, Sum()), true);
  absl::Status s = h.ok() ? h->Wait() : h.status();
  if (!s.ok()) return absl::StrCat(name, " step ", step, ": ", s.ToString());
  for (int64_t i = 0; i < elements; ++i) {
    if (data[i] != Expected(group.size(), step, i)) {
      return absl::StrCat(name, " step ", step, " element ", i, " is ", data[i], ", want ",
                          Expected(group.size(), step, i));
    }
  }
  return "";
}

TEST_CASE("a repeated synchronous allreduce is predicted and stays exact", "[engine]") {
  // On a copy (1000 floats), and in band (400000 floats, 1.6 MB: the
  // pairwise algorithm at 3 ranks).
  const int64_t elements = GENERATE(int64_t{1000}, int64_t{400000});
  INFO(elements << " elements");
  EngineGroup group(3);
  constexpr int kSteps = 30;
  std::vector<std::string> results = OnEveryRank<std::string>(3, [&](int rank) {
    for (int step = 0; step < kSteps; ++step) {
      std::string wrong = SyncStep(group, rank, "loss", elements, step);
      if (!wrong.empty()) return wrong;
    }
    return std::string();
  });
  for (const std::string& r : results) CHECK(r == "");
  // The first two rounds teach the prediction; every later one uses it.
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(group.engine(rank).confirmed_predictions() == kSteps - 2);
  }
}

// Over TCP; in shared memory all of them go in band.
TEST_CASE("at 2 ranks allreduces are predicted on a copy up to 256 KiB, in band above",
          "[engine]") {
  const int64_t elements = GENERATE(int64_t{65536}, int64_t{262144}, int64_t{524288});
  INFO(elements << " elements");
  EngineGroup group(2);
  constexpr int kSteps = 12;
  std::vector<std::string> results = OnEveryRank<std::string>(2, [&](int rank) {
    for (int step = 0; step < kSteps; ++step) {
      std::string wrong = SyncStep(group, rank, "loss", elements, step);
      if (!wrong.empty()) return wrong;
    }
    return std::string();
  });
  for (const std::string& r : results) CHECK(r == "");
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(group.engine(rank).confirmed_predictions() == kSteps - 2);
  }
}

// Which way a prediction runs, by the ring's path: test_engine runs this on
// one host's shared memory, test_engine_tcp (HOROVODD_SHM=0) over TCP.
TEST_CASE("in one host's shared memory every prediction is confirmed in band", "[engine]") {
  EngineGroup group(4);
  internal::Communicator& comm = group.communicator(0);
  auto choice = [&](int64_t elements, double prescale) {
    internal::PredictedAllreduce predicted;
    predicted.name = "loss";
    predicted.elements = elements;
    predicted.options = Sum();
    predicted.options.prescale_factor = prescale;
    return internal::ChooseSpeculation(comm, predicted);
  };
  using internal::Speculation;
  if (group.in_shared_memory()) {
    for (const int64_t elements : {int64_t{1}, int64_t{1024}, int64_t{262144}, int64_t{2} << 20}) {
      INFO(elements << " elements");
      CHECK(choice(elements, 1.0) == Speculation::kInBand);
    }
    // A prescaled allreduce cannot confirm itself: small ones go on a copy.
    CHECK(choice(1024, 0.5) == Speculation::kOnCopy);
  } else {
    CHECK(choice(1024, 1.0) == Speculation::kOnCopy);
    CHECK(choice(262144, 1.0) == Speculation::kOnCopy);  // 1 MiB at 4 ranks
  }
}

TEST_CASE("in band, ranks that were ready keep their tensors when one was not", "[engine]") {
  // 400000 floats at 3 ranks: the pairwise algorithm, confirmed in band.
  constexpr int64_t kElements = 400000;
  EngineGroup group(3);
  std::vector<std::string> results = OnEveryRank<std::string>(3, [&](int rank) {
    int step = 0;
    for (; step < 4; ++step) {  // "loss" is predicted from the third on
      std::string wrong = SyncStep(group, rank, "loss", kElements, step);
      if (!wrong.empty()) return wrong;
    }
    // Ranks 0 and 1 have "loss" (and "grad") pending; rank 2 only "grad",
    // and "loss" once "grad" is done. The round that expected "loss" finds
    // rank 2 not ready: nothing may have been written into the others'
    // "loss" tensors, which must come out exact.
    std::vector<float> grad(64, static_cast<float>(rank + 1));
    auto enqueue_grad = [&](bool urgent) {
      return group.engine(rank).Enqueue(testing::AllreduceRequest("grad", {ViewOf(grad)}, Sum()),
                                        urgent);
    };
    if (rank == 2) {
      absl::StatusOr<Handle> h = enqueue_grad(true);
      absl::Status s = h.ok() ? h->Wait() : h.status();
      if (!s.ok()) return s.ToString();
      std::string wrong = SyncStep(group, rank, "loss", kElements, step);
      if (!wrong.empty()) return wrong;
    } else {
      std::vector<float> loss(kElements);
      for (int64_t i = 0; i < kElements; ++i) loss[i] = Value(rank, step, i);
      absl::StatusOr<Handle> l = group.engine(rank).Enqueue(
          testing::AllreduceRequest("loss", {ViewOf(loss)}, Sum()), true);
      absl::StatusOr<Handle> g = enqueue_grad(false);
      if (!l.ok() || !g.ok()) return std::string("enqueue failed");
      if (absl::Status s = l->Wait(); !s.ok()) return s.ToString();
      if (absl::Status s = g->Wait(); !s.ok()) return s.ToString();
      for (int64_t i = 0; i < kElements; ++i) {
        if (loss[i] != Expected(3, step, i)) {
          return absl::StrCat("loss element ", i, " is ", loss[i], ", want ", Expected(3, step, i));
        }
      }
    }
    if (grad[63] != 6.0f) return absl::StrCat("grad is ", grad[63], ", want 6");
    return std::string();
  });
  for (const std::string& r : results) CHECK(r == "");
  for (int rank = 0; rank < 3; ++rank) CHECK(group.engine(rank).confirmed_predictions() == 2);
}

TEST_CASE("a wrong prediction is thrown away and the round runs as usual", "[engine]") {
  // Sizes in units: 100, 300 and 50 floats (on a copy), or 4000 times that
  // (400000 and 1200000 floats in band, 200000 on a copy).
  const int64_t unit = GENERATE(int64_t{1}, int64_t{4000});
  INFO("unit " << unit);
  EngineGroup group(3);
  std::vector<std::string> results = OnEveryRank<std::string>(3, [&](int rank) {
    std::string wrong;
    int step = 0;
    auto run = [&](const std::string& name, int64_t elements, int times) {
      for (int i = 0; i < times && wrong.empty(); ++i) {
        wrong = SyncStep(group, rank, name, elements, step++);
      }
    };
    run("loss", 100 * unit, 4);   // predicted from the third call on
    run("loss", 300 * unit, 4);   // a new shape: the guess (100 units) is wrong once
    run("metric", 50 * unit, 1);  // another name: wrong again
    run("loss", 300 * unit, 4);
    if (!wrong.empty()) return wrong;
    // Ranks disagree on what comes next: rank 0 wants "loss" at once, the
    // others first finish an asynchronous "grad" that rank 0 sends later.
    std::vector<float> grad(64, static_cast<float>(rank + 1));
    if (rank == 0) {
      run("loss", 300 * unit, 1);
      absl::StatusOr<Handle> h = group.engine(rank).Enqueue(
          testing::AllreduceRequest("grad", {ViewOf(grad)}, Sum()), true);
      absl::Status s = h.ok() ? h->Wait() : h.status();
      if (!s.ok()) return s.ToString();
    } else {
      absl::StatusOr<Handle> h = group.engine(rank).Enqueue(
          testing::AllreduceRequest("grad", {ViewOf(grad)}, Sum()), false);
      if (!h.ok()) return h.status().ToString();
      run("loss", 300 * unit, 1);
      if (absl::Status s = h->Wait(); !s.ok()) return s.ToString();
    }
    if (!wrong.empty()) return wrong;
    if (grad[63] != 6.0f) return absl::StrCat("grad is ", grad[63], ", want 6");
    run("loss", 300 * unit, 4);  // and predictions resume
    return wrong;
  });
  for (const std::string& r : results) CHECK(r == "");
  // 2 + 2 + 0 + 2 (+ 0 or 1: after "grad") + 2 rounds confirmed at least.
  CHECK(group.engine(0).confirmed_predictions() >= 8);
}

TEST_CASE("a new ring starts predicting from scratch", "[engine]") {
  EngineGroup group(2);
  auto loop = [&](int steps) {
    return OnEveryRank<std::string>(2, [&](int rank) {
      for (int step = 0; step < steps; ++step) {
        std::string wrong = SyncStep(group, rank, "loss", 10, step);
        if (!wrong.empty()) return wrong;
      }
      return std::string();
    });
  };
  for (const std::string& r : loop(5)) CHECK(r == "");
  CHECK(group.engine(1).confirmed_predictions() == 3);
  group.Detach(0);
  group.Detach(1);
  group.Connect();
  for (const std::string& r : loop(5)) CHECK(r == "");
  CHECK(group.engine(1).confirmed_predictions() == 6);
}

}  // namespace
}  // namespace horovodd
