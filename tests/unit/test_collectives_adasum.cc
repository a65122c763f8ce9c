// gloo_adasum.h: Horovod's vector-halving, distance-doubling Adasum against
// the pairwise rule applied level by level on one thread, at 2, 4 and 8
// ranks, with lengths that split unevenly and fewer elements than ranks.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/strings/str_cat.h"
#include "test_collectives_harness.h"
#include "worker_runtime/gloo/gloo_adasum.h"

namespace horovodd {
namespace {

using testing::OnEveryRank;

std::vector<double> Pair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  if (aa == 0) return b;
  if (bb == 0) return a;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    out[i] = (1 - dot / (2 * aa)) * a[i] + (1 - dot / (2 * bb)) * b[i];
  }
  return out;
}

// Rank 2i with 2i+1, then the pairs' results at distance 2, and so on.
std::vector<double> Reference(std::vector<std::vector<double>> vectors) {
  for (size_t distance = 1; distance < vectors.size(); distance *= 2) {
    for (size_t start = 0; start < vectors.size(); start += 2 * distance) {
      vectors[start] = Pair(vectors[start], vectors[start + distance]);
    }
  }
  return vectors[0];
}

std::vector<std::vector<double>> RandomInputs(int ranks, size_t length, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<std::vector<double>> inputs(ranks, std::vector<double>(length));
  for (auto& v : inputs) {
    for (double& x : v) x = uniform(random);
  }
  return inputs;
}

TEST_CASE("adasum: equals the pairwise rule level by level", "[collectives][adasum]") {
  gloo::rendezvous::HashStore store;
  int group_number = 0;
  for (int ranks : {2, 4, 8}) {
    testing::RankGroup group(store, absl::StrCat("adasum", group_number++), ranks);
    for (size_t length : {size_t{1001}, size_t{3}, size_t{0}}) {
      const auto inputs = RandomInputs(ranks, length, 7 + ranks);
      const std::vector<double> expected = length == 0 ? std::vector<double>{} : Reference(inputs);
      std::vector<std::string> results = OnEveryRank<std::string>(ranks, [&](int rank) {
        std::vector<double> mine = inputs[rank];
        TensorView view{mine.data(), DType::kFloat64, {static_cast<int64_t>(length)}, Device{}};
        absl::Status status = internal::Adasum(group.context(rank), view, 2.0, 0.5);
        if (!status.ok()) return status.ToString();
        for (size_t i = 0; i < length; ++i) {
          if (std::abs(mine[i] - expected[i]) > 1e-12) {
            return absl::StrCat("element ", i, ": ", mine[i], " != ", expected[i]);
          }
        }
        return std::string("ok");
      });
      for (int rank = 0; rank < ranks; ++rank) {
        INFO(ranks << " ranks, length " << length << ", rank " << rank);
        CHECK(results[rank] == "ok");
      }
    }
  }
}

TEST_CASE("adasum: float32 in, float32 out; other dtypes and rank counts are refused",
          "[collectives][adasum]") {
  gloo::rendezvous::HashStore store;
  {
    testing::RankGroup group(store, "adasum-f32", 2);
    std::vector<std::string> results = OnEveryRank<std::string>(2, [&](int rank) {
      // Equal vectors: their average; orthogonal ones: their sum.
      std::vector<float> equal = {1.0f, 2.0f};
      std::vector<float> orthogonal = {rank == 0 ? 1.0f : 0.0f, rank == 0 ? 0.0f : 3.0f};
      for (std::vector<float>* v : {&equal, &orthogonal}) {
        TensorView view{v->data(), DType::kFloat32, {2}, Device{}};
        absl::Status status = internal::Adasum(group.context(rank), view);
        if (!status.ok()) return status.ToString();
      }
      std::vector<int32_t> ints = {1, 2};
      TensorView int_view{ints.data(), DType::kInt32, {2}, Device{}};
      return absl::StrCat(equal[0], ",", equal[1], " ", orthogonal[0], ",", orthogonal[1], " ",
                          internal::Adasum(group.context(rank), int_view).message());
    });
    for (const std::string& result : results) {
      CHECK(result ==
            "1,2 1,3 Adasum combines float16, bfloat16, float32 and float64 tensors, not int32");
    }
  }
  testing::RankGroup three(store, "adasum-3", 3);
  std::vector<std::string> results = OnEveryRank<std::string>(3, [&](int rank) {
    std::vector<double> v = {1.0};
    TensorView view{v.data(), DType::kFloat64, {1}, Device{}};
    return std::string(internal::Adasum(three.context(rank), view).message());
  });
  for (const std::string& result : results) {
    CHECK(result == "Adasum runs on a power-of-two number of ranks, not 3");
  }
}

}  // namespace
}  // namespace horovodd
