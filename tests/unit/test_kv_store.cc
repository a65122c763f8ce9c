// The key-value store a generation bootstraps through (store/): the
// in-process store's waits, deadlines and abort; Gloo's store over it, where
// a Status becomes Gloo's exception and back; and a ring connected through
// it, with one read per rank.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/common/error.h>

#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_kv_store.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/kv_client/gloo_kv_store.h"
#include "worker_runtime/kv_client/in_memory_kv_store.h"

namespace horovodd::internal {
namespace {

// Far past what any wait here should take: a wait that ends by this deadline
// instead of its condition fails the test rather than hanging it.
constexpr absl::Duration kPatience = absl::Seconds(60);

TEST_CASE("the in-process store gets what was set, all keys in one call") {
  InMemoryKvStore store;
  REQUIRE(store.Set("a", "1").ok());
  REQUIRE(store
              .Set("b", std::string("\0"
                                    "2",
                                    2))
              .ok());
  absl::StatusOr<std::vector<std::string>> values = store.Get({"b", "a"}, kPatience);
  REQUIRE(values.ok());
  CHECK(*values == std::vector<std::string>{std::string("\0"
                                                        "2",
                                                        2),
                                            "1"});
  CHECK(store.gets() == 1);
  CHECK(store.Wait({"a", "b"}, kPatience).ok());
  absl::StatusOr<std::string> one = GetKey(store, "a", kPatience);
  REQUIRE(one.ok());
  CHECK(*one == "1");
}

TEST_CASE(
    "the in-process store's waits end when the key comes, the deadline passes, or it is "
    "aborted") {
  InMemoryKvStore store;
  SECTION("a key set by another thread") {
    std::thread writer([&] { REQUIRE(store.Set("late", "ok").ok()); });
    absl::StatusOr<std::string> value = GetKey(store, "late", kPatience);
    writer.join();
    REQUIRE(value.ok());
    CHECK(*value == "ok");
  }
  SECTION("a key that never comes is DEADLINE_EXCEEDED, naming it") {
    absl::Status status = store.Wait({"never"}, absl::Milliseconds(20));
    CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_THAT(std::string(status.message()), Catch::Contains("'never'"));
    CHECK(GetKey(store, "never", absl::ZeroDuration()).status().code() ==
          absl::StatusCode::kDeadlineExceeded);
  }
  SECTION("an abort wakes a waiter and refuses every later call") {
    absl::Status waited;
    std::thread waiter([&] { waited = store.Wait({"never"}, kPatience); });
    // The call is counted under the lock it then waits on: once counted, it waits.
    REQUIRE(testing::WaitUntil([&] { return store.gets() == 1; }));
    store.Abort("generation 3 was superseded");
    waiter.join();
    CHECK(waited.code() == absl::StatusCode::kAborted);
    CHECK_THAT(std::string(waited.message()), Catch::Contains("generation 3 was superseded"));
    CHECK(store.Set("k", "v").code() == absl::StatusCode::kAborted);
    CHECK(store.Get({"k"}, kPatience).status().code() == absl::StatusCode::kAborted);
  }
}

TEST_CASE("Gloo's store over a KvStore sets, waits and gets, reading each key once") {
  InMemoryKvStore keys;
  GlooKvStore writer(keys, kPatience);
  GlooKvStore reader(keys, kPatience);
  writer.set("a", {'1'});
  writer.set("b", {'\0', '2'});
  CHECK(keys.sets() == 2);

  reader.wait({"a", "b"});
  CHECK(keys.gets() == 1);
  CHECK(reader.get("b") == std::vector<char>{'\0', '2'});
  CHECK(reader.get("a") == std::vector<char>{'1'});
  reader.wait({"a"}, std::chrono::milliseconds(10));
  CHECK(keys.gets() == 1);

  // A key not read before is asked for once; a wait asks only for the missing ones.
  writer.set("c", {'3'});
  CHECK(reader.get("c") == std::vector<char>{'3'});
  CHECK(reader.get("c") == std::vector<char>{'3'});
  CHECK(keys.gets() == 2);
  writer.set("d", {'4'});
  reader.wait({"a", "c", "d"});
  CHECK(keys.gets() == 3);
  CHECK(reader.get("d") == std::vector<char>{'4'});
  CHECK(keys.gets() == 3);
  CHECK(reader.failure().ok());
}

TEST_CASE("Gloo's store over a KvStore turns its errors into Gloo's exceptions") {
  InMemoryKvStore keys;
  GlooKvStore store(keys, absl::Milliseconds(20));
  SECTION("a deadline that passes is Gloo's timeout, and DEADLINE_EXCEEDED underneath") {
    try {
      store.wait({"never"}, std::chrono::milliseconds(20));
      FAIL("wait returned without the key");
    } catch (const gloo::IoException& e) {
      CHECK(IsGlooTimeoutMessage(e.what()));
      CHECK_THAT(std::string(e.what()), Catch::Contains("never"));
    }
    CHECK(store.failure().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_FALSE(store.superseded());
    // get() without a timeout of its own waits the store's.
    CHECK_THROWS_AS(store.get("never"), gloo::IoException);
  }
  SECTION("an aborted namespace says the generation is superseded") {
    keys.Abort("generation 2 was superseded");
    try {
      store.set("k", {'v'});
      FAIL("set into an aborted namespace succeeded");
    } catch (const gloo::IoException& e) {
      CHECK_FALSE(IsGlooTimeoutMessage(e.what()));
      CHECK_THAT(std::string(e.what()), Catch::Contains("superseded"));
    }
    CHECK(store.superseded());
    CHECK(store.failure().code() == absl::StatusCode::kAborted);
  }
}

TEST_CASE("a ring connects through a KvStore with one write and one read per rank") {
  InMemoryKvStore keys;
  constexpr int kSize = 3;
  std::vector<RingResult> results(kSize);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      RingOptions options;
      options.generation = 4;
      options.rank = rank;
      options.size = kSize;
      options.bind_address = "127.0.0.1";
      options.timeout = kPatience;
      results[rank] = ConnectRingThroughStore(keys, options);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 0; rank < kSize; ++rank) {
    INFO("rank " << rank);
    REQUIRE(results[rank].ring.ok());
    CHECK((*results[rank].ring)->size == kSize);
    CHECK((*results[rank].ring)->health().ok());
  }
  CHECK(keys.sets() == kSize);
  CHECK(keys.gets() == kSize);
}

TEST_CASE("rings of one generation with their own key scopes never read each other's keys") {
  // What shutdown and init again in one process do: the second ring of the
  // generation connects through the same namespace, where the first ring's
  // addresses (nobody listens there any more) are still kept.
  InMemoryKvStore keys;
  constexpr int kSize = 2;
  for (const char* scope : {"", ".i2", ".i3"}) {
    std::vector<RingResult> results(kSize);
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < kSize; ++rank) {
      ranks.emplace_back([&, rank] {
        RingOptions options;
        options.generation = 7;
        options.rank = rank;
        options.size = kSize;
        options.bind_address = "127.0.0.1";
        options.timeout = kPatience;
        options.key_scope = scope;
        results[rank] = ConnectRingThroughStore(keys, options);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int rank = 0; rank < kSize; ++rank) {
      INFO("scope '" << scope << "', rank " << rank);
      REQUIRE(results[rank].ring.ok());
      CHECK((*results[rank].ring)->health().ok());
    }
    // Closed before the next ring connects, as Shutdown() does.
    results.clear();
  }
  CHECK(keys.sets() == 3 * kSize);
}

TEST_CASE("a ring whose store fails comes back as a Status, not an exception") {
  InMemoryKvStore keys;
  RingOptions options;
  options.generation = 5;
  options.rank = 0;
  options.size = 2;
  options.bind_address = "127.0.0.1";
  SECTION("a peer that never comes: DEADLINE_EXCEEDED, not superseded") {
    options.timeout = absl::Milliseconds(100);
    RingResult result = ConnectRingThroughStore(keys, options);
    CHECK(result.ring.status().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_THAT(std::string(result.ring.status().message()),
               Catch::Contains("connecting gloo context (rank 0 of 2) failed"));
    CHECK_FALSE(result.superseded);
  }
  SECTION("a generation superseded while connecting: UNAVAILABLE, and superseded") {
    options.timeout = kPatience;
    std::thread abort([&] { keys.Abort("generation 5 was superseded"); });
    RingResult result = ConnectRingThroughStore(keys, options);
    abort.join();
    CHECK(result.ring.status().code() == absl::StatusCode::kUnavailable);
    CHECK(result.superseded);
  }
}

}  // namespace
}  // namespace horovodd::internal
