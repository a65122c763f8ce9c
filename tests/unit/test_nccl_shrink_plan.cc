// When a new generation's NCCL communicator is shrunk from the previous one
// instead of built anew (the decision; the GPU check runs the shrink itself).
#include <catch2/catch.hpp>

#include "worker_runtime/nccl_shrink_plan.h"

namespace horovodd::internal {
namespace {

TEST_CASE("Removing workers excludes their previous ranks", "[nccl][shrink]") {
  // Worker ids by rank: 10 11 12 13; workers 11 and 13 left.
  std::optional<std::vector<int>> excluded = ShrinkExclusions({10, 11, 12, 13}, {10, 12});
  REQUIRE(excluded.has_value());
  CHECK(*excluded == std::vector<int>{1, 3});

  excluded = ShrinkExclusions({10, 11, 12, 13}, {11, 12, 13});
  REQUIRE(excluded.has_value());
  CHECK(*excluded == std::vector<int>{0});
}

TEST_CASE("The same members in the same order exclude nobody", "[nccl][shrink]") {
  std::optional<std::vector<int>> excluded = ShrinkExclusions({4, 5}, {4, 5});
  REQUIRE(excluded.has_value());
  CHECK(excluded->empty());
}

TEST_CASE("An added or reordered worker needs a new communicator", "[nccl][shrink]") {
  CHECK_FALSE(ShrinkExclusions({10, 11, 12}, {10, 11, 12, 13}).has_value());  // grew
  CHECK_FALSE(ShrinkExclusions({10, 11, 12}, {10, 14}).has_value());          // replaced
  CHECK_FALSE(ShrinkExclusions({10, 11, 12}, {12, 10}).has_value());          // reordered
}

TEST_CASE("An unknown membership never shrinks", "[nccl][shrink]") {
  // An older daemon sends no worker ids: both lists may come back empty.
  CHECK_FALSE(ShrinkExclusions({}, {}).has_value());
  CHECK_FALSE(ShrinkExclusions({10, 11}, {}).has_value());
  CHECK_FALSE(ShrinkExclusions({}, {10}).has_value());
}

}  // namespace
}  // namespace horovodd::internal
