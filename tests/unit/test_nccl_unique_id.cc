// The NCCL unique-id exchange through a generation's key-value namespace,
// over the in-process store (no daemon, no NCCL, no GPU).
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "worker_runtime/gpu/unique_id_exchange.h"
#include "worker_runtime/kv_client/in_memory_kv_store.h"

namespace horovodd::internal {
namespace {

constexpr size_t kIdBytes = 128;

// The in-process store (InMemoryKvStore: Get waits for a key another thread
// sets, like the daemon's KvGet), recording every call. `fail_set` makes the
// next Set fail with that status.
class RecordingStore final : public KvStore {
 public:
  absl::Status Set(const std::string& key, std::string value) override {
    Record("set " + key);
    if (!fail_set.ok()) return fail_set;
    return store.Set(key, std::move(value));
  }
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override {
    Record("get " + absl::StrJoin(keys, ","), timeout);
    return store.Get(keys, timeout);
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    Record("wait " + absl::StrJoin(keys, ","), timeout);
    return store.Wait(keys, timeout);
  }

  void Put(const std::string& key, const std::string& value) {
    REQUIRE(store.Set(key, value).ok());
  }

  InMemoryKvStore store;
  std::vector<std::string> calls;
  std::vector<absl::Duration> timeouts;
  absl::Status fail_set;

 private:
  void Record(std::string call, std::optional<absl::Duration> timeout = std::nullopt) {
    std::lock_guard<std::mutex> lock(mu_);
    calls.push_back(std::move(call));
    if (timeout.has_value()) timeouts.push_back(*timeout);
  }
  std::mutex mu_;
};

UniqueIdExchange ForRank(int rank, int* made) {
  UniqueIdExchange exchange;
  exchange.rank = rank;
  exchange.id_bytes = kIdBytes;
  exchange.timeout = absl::Seconds(60);
  exchange.make_id = [made]() -> absl::StatusOr<std::string> {
    ++*made;
    return std::string(kIdBytes, 'x');
  };
  return exchange;
}

TEST_CASE("rank 0 makes the id once and publishes it under nccl/unique_id") {
  RecordingStore store;
  int made = 0;
  absl::StatusOr<std::string> id = ExchangeUniqueId(store, ForRank(0, &made));
  REQUIRE(id.ok());
  CHECK(*id == std::string(kIdBytes, 'x'));
  CHECK(made == 1);
  CHECK(store.calls == std::vector<std::string>{"set nccl/unique_id"});
}

TEST_CASE("other ranks read rank 0's id and never make one") {
  RecordingStore store;
  store.Put("nccl/unique_id", std::string(kIdBytes, 'r'));
  int made = 0;
  absl::StatusOr<std::string> id = ExchangeUniqueId(store, ForRank(3, &made));
  REQUIRE(id.ok());
  CHECK(*id == std::string(kIdBytes, 'r'));
  CHECK(made == 0);
  CHECK(store.calls == std::vector<std::string>{"get nccl/unique_id"});
  CHECK(store.timeouts == std::vector<absl::Duration>{absl::Seconds(60)});
}

TEST_CASE("ranks started in any order all end with rank 0's id") {
  RecordingStore store;
  int made = 0;
  std::vector<absl::StatusOr<std::string>> ids(4, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  // Readers first, so they really wait for rank 0.
  for (int rank = 3; rank >= 0; --rank) {
    ranks.emplace_back([&, rank] { ids[rank] = ExchangeUniqueId(store, ForRank(rank, &made)); });
  }
  for (std::thread& t : ranks) t.join();
  CHECK(made == 1);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    REQUIRE(ids[rank].ok());
    CHECK(*ids[rank] == *ids[0]);
  }
}

TEST_CASE("an id of the wrong size is an internal error naming the sizes") {
  RecordingStore store;
  store.Put("nccl/unique_id", "short");
  int made = 0;
  absl::StatusOr<std::string> id = ExchangeUniqueId(store, ForRank(1, &made));
  REQUIRE(id.status().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(id.status().message()),
             Catch::Contains("has 5 bytes, expected 128") && Catch::Contains("nccl/unique_id"));
}

TEST_CASE("store failures keep their code and say which rank waited for what") {
  RecordingStore store;
  int made = 0;
  SECTION("a superseded generation stays ABORTED") {
    store.store.Abort("generation 4 was superseded by generation 5");
    absl::StatusOr<std::string> id = ExchangeUniqueId(store, ForRank(2, &made));
    REQUIRE(id.status().code() == absl::StatusCode::kAborted);
    CHECK_THAT(std::string(id.status().message()),
               Catch::Contains("rank 2 waiting for rank 0's 'nccl/unique_id'") &&
                   Catch::Contains("superseded by generation 5"));
  }
  SECTION("rank 0 never publishing is DEADLINE_EXCEEDED") {
    UniqueIdExchange exchange = ForRank(1, &made);
    exchange.timeout = absl::Milliseconds(50);
    absl::StatusOr<std::string> id = ExchangeUniqueId(store, exchange);
    CHECK(id.status().code() == absl::StatusCode::kDeadlineExceeded);
  }
  SECTION("rank 0 failing to publish") {
    store.fail_set = absl::UnavailableError("daemon unreachable");
    absl::StatusOr<std::string> id = ExchangeUniqueId(store, ForRank(0, &made));
    REQUIRE(id.status().code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(id.status().message()),
               Catch::Contains("rank 0 publishing 'nccl/unique_id'"));
  }
}

TEST_CASE("rank 0 failing to make the id publishes nothing") {
  RecordingStore store;
  UniqueIdExchange exchange;
  exchange.rank = 0;
  exchange.id_bytes = kIdBytes;
  exchange.make_id = []() -> absl::StatusOr<std::string> {
    return absl::UnavailableError("no network interface found");
  };
  absl::StatusOr<std::string> id = ExchangeUniqueId(store, exchange);
  REQUIRE(id.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(id.status().message()),
             Catch::Contains("rank 0 could not create the NCCL unique id") &&
                 Catch::Contains("no network interface found"));
  CHECK(store.calls.empty());
}

}  // namespace
}  // namespace horovodd::internal
