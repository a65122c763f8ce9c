// The per-job event loop: order, timers, cancellation.
#include <catch2/catch.hpp>

#include <future>
#include <vector>

#include "daemon/job/event_loop.h"

using horovodd::daemon::EventLoop;

TEST_CASE("posted closures run in order on the loop thread") {
  EventLoop loop;
  std::vector<int> seen;
  std::promise<void> done;
  for (int i = 0; i < 100; ++i) {
    loop.Post([&seen, &loop, i] {
      CHECK(loop.InLoopThread());
      seen.push_back(i);
    });
  }
  loop.Post([&done] { done.set_value(); });
  REQUIRE(done.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  REQUIRE(seen.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(seen[i] == i);
}

TEST_CASE("timers fire in deadline order and cancelled ones never fire") {
  EventLoop loop;
  std::vector<int> fired;
  std::promise<void> done;
  const absl::Time base = absl::Now();
  loop.PostAt(base + absl::Milliseconds(30), [&] { fired.push_back(3); });
  auto cancelled = loop.PostAt(base + absl::Milliseconds(20), [&] { fired.push_back(99); });
  loop.PostAt(base + absl::Milliseconds(10), [&] { fired.push_back(1); });
  loop.PostAt(base + absl::Milliseconds(40), [&] { done.set_value(); });
  loop.Cancel(cancelled);
  REQUIRE(done.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  CHECK(fired == std::vector<int>{1, 3});
}

TEST_CASE("a stopped loop drops later posts") {
  EventLoop loop;
  loop.Stop();
  bool ran = false;
  loop.Post([&] { ran = true; });
  CHECK(loop.PostAfter(absl::Milliseconds(1), [&] { ran = true; }) == 0);
  CHECK_FALSE(ran);
}
