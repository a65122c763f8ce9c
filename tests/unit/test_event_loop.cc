// The per-job event loop: order, timers, cancellation.
#include <catch2/catch.hpp>

#include <functional>
#include <future>
#include <vector>

#include "daemon/loop/event_loop.h"

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

// ---- on a simulated clock: timers fire when time is advanced past them, never before.

namespace {

using horovodd::daemon::SimulatedClock;

// Waits (a generous real bound) for a closure the loop runs; true when it ran.
bool Ran(std::promise<void>& ran) {
  return ran.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready;
}

}  // namespace

TEST_CASE("on a simulated clock, a timer waits for time to be advanced past its deadline") {
  SimulatedClock clock;
  EventLoop loop(&clock);
  CHECK(&loop.clock() == &clock);
  std::vector<int> fired;  // touched on the loop thread only, read after a barrier
  loop.PostAfter(absl::Seconds(1), [&] { fired.push_back(1); });
  loop.PostAfter(absl::Seconds(3), [&] { fired.push_back(3); });
  loop.PostAfter(absl::Seconds(60), [&] { fired.push_back(60); });

  // A timer due now runs after every timer with an earlier deadline: a barrier.
  auto barrier = [&] {
    std::promise<void> ran;
    loop.PostAt(clock.Now(), [&] { ran.set_value(); });
    REQUIRE(Ran(ran));
  };
  barrier();
  CHECK(fired.empty());

  clock.Advance(absl::Seconds(5));
  barrier();
  CHECK(fired == std::vector<int>{1, 3});

  clock.Advance(absl::Seconds(54));  // 59 s in: still short of 60
  barrier();
  CHECK(fired == std::vector<int>{1, 3});

  clock.Advance(absl::Seconds(1));
  barrier();
  CHECK(fired == std::vector<int>{1, 3, 60});
}

TEST_CASE("on a simulated clock, posted closures run at once and cancelled timers never fire") {
  SimulatedClock clock;
  EventLoop loop(&clock);
  bool cancelled_fired = false;
  auto cancelled = loop.PostAfter(absl::Seconds(10), [&] { cancelled_fired = true; });
  std::promise<void> posted;
  loop.Post([&] { posted.set_value(); });
  REQUIRE(Ran(posted));  // no time had to pass

  loop.Cancel(cancelled);
  std::promise<void> later;
  loop.PostAfter(absl::Seconds(20), [&] { later.set_value(); });
  clock.Advance(absl::Seconds(30));
  REQUIRE(Ran(later));
  CHECK_FALSE(cancelled_fired);
}

TEST_CASE("a simulated clock moves only when advanced") {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  CHECK(clock.Now() == absl::FromUnixSeconds(1000));
  clock.Advance(absl::Milliseconds(1500));
  CHECK(clock.Now() == absl::FromUnixSeconds(1000) + absl::Milliseconds(1500));
  clock.Advance(absl::ZeroDuration());
  CHECK(clock.Now() == absl::FromUnixSeconds(1000) + absl::Milliseconds(1500));
}

TEST_CASE(
    "advancing a simulated clock runs each timer at its own deadline; a jump runs them late") {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  EventLoop loop(&clock);
  // A periodic timer, as the liveness monitor's: each run reads the time and
  // sets the next one a second later. Touched on the loop thread only, read
  // once Advance/Jump returned (every sleeper caught up by then).
  std::vector<absl::Time> runs;
  std::function<void()> tick = [&] {
    runs.push_back(clock.Now());
    loop.PostAfter(absl::Seconds(1), tick);
  };
  std::promise<void> started;
  loop.Post([&] {
    loop.PostAfter(absl::Seconds(1), tick);
    started.set_value();
  });
  REQUIRE(Ran(started));

  clock.Advance(absl::Milliseconds(3500));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  CHECK(runs == std::vector<absl::Time>{t0 + absl::Seconds(1), t0 + absl::Seconds(2),
                                        t0 + absl::Seconds(3)});
  // As a process stopped for 10 s: the one due timer runs once, late.
  clock.Jump(absl::Seconds(10));
  REQUIRE(runs.size() == 4);
  CHECK(runs[3] == t0 + absl::Milliseconds(13500));
  loop.Stop();
}
