// The runtime's options as a worker reads them from its environment
// (RuntimeOptions::FromEnvironment): the shared-memory knobs.

#include <string>

#include <catch2/catch.hpp>

#include "scoped_env.h"
#include "worker_runtime/runtime/runtime.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal {
namespace {

using horovodd::testing::ScopedEnv;

// What every launched worker has.
struct Launched {
  ScopedEnv address{"HOROVODD_DAEMON_ADDR", "127.0.0.1:1"};
  ScopedEnv job{"HOROVODD_JOB_ID", "job-1"};
  ScopedEnv worker{"HOROVODD_WORKER_ID", "0"};
};

TEST_CASE("HOROVODD_SHM_DECIDER_FROM sets from how many local ranks rank 0 decides") {
  Launched launched;
  SECTION("unset: the default") {
    ScopedEnv from("HOROVODD_SHM_DECIDER_FROM", nullptr);
    absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
    REQUIRE(options.ok());
    CHECK(options->local.rank_zero_decides_from == shm::kRankZeroDecidesFrom);
  }
  SECTION("a number of ranks, or 0 for never") {
    for (const char* value : {"2", "0", "512"}) {
      ScopedEnv from("HOROVODD_SHM_DECIDER_FROM", value);
      absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
      REQUIRE(options.ok());
      CHECK(options->local.rank_zero_decides_from == std::stoi(value));
    }
  }
  SECTION("anything else fails naming the variable and the value") {
    for (const char* value : {"many", "-1", "2.5"}) {
      ScopedEnv from("HOROVODD_SHM_DECIDER_FROM", value);
      absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
      REQUIRE(options.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(options.status().message()),
                 Catch::Contains("HOROVODD_SHM_DECIDER_FROM") &&
                     Catch::Contains(std::string("got '") + value + "'"));
    }
  }
}

TEST_CASE("HOROVODD_SHM_SLOT_BYTES sets the shared-memory round's size, within bounds") {
  Launched launched;
  {
    ScopedEnv slot("HOROVODD_SHM_SLOT_BYTES", "65536");
    absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
    REQUIRE(options.ok());
    CHECK(options->local.slot_bytes == 65536);
  }
  for (const char* value : {"100", "lots"}) {
    ScopedEnv slot("HOROVODD_SHM_SLOT_BYTES", value);
    absl::StatusOr<RuntimeOptions> options = RuntimeOptions::FromEnvironment();
    REQUIRE(options.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(options.status().message()),
               Catch::Contains("HOROVODD_SHM_SLOT_BYTES") &&
                   Catch::Contains(std::string("got '") + value + "'"));
  }
}

}  // namespace
}  // namespace horovodd::internal
