// RingReaper: rings handed to it are destroyed on its own thread, and none
// is left undestroyed when it goes.
#include <atomic>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>
#include <gloo/context.h>

#include "wait_until.h"
#include "worker_runtime/gloo/ring_reaper.h"

namespace horovodd {
namespace {

// A context that records where and whether it was destroyed.
class RecordingContext : public gloo::Context {
 public:
  RecordingContext(std::atomic<int>* destroyed, std::thread::id* destroyed_on)
      : gloo::Context(0, 1), destroyed_(destroyed), destroyed_on_(destroyed_on) {}
  ~RecordingContext() override {
    if (destroyed_on_ != nullptr) *destroyed_on_ = std::this_thread::get_id();
    destroyed_->fetch_add(1);
  }

 private:
  std::atomic<int>* destroyed_;
  std::thread::id* destroyed_on_;
};

TEST_CASE("A retired ring is destroyed on the reaper's thread, not the caller's") {
  std::atomic<int> destroyed{0};
  std::thread::id destroyed_on;
  internal::RingReaper reaper;
  reaper.Retire(std::make_shared<RecordingContext>(&destroyed, &destroyed_on));
  REQUIRE(testing::WaitUntil([&] { return destroyed.load() == 1; }));
  CHECK(destroyed_on != std::this_thread::get_id());
}

TEST_CASE("A ring someone else still holds outlives its retirement") {
  std::atomic<int> destroyed{0};
  internal::RingReaper reaper;
  auto kept = std::make_shared<RecordingContext>(&destroyed, nullptr);
  reaper.Retire(kept);
  reaper.Retire(nullptr);  // ignored
  // A second ring retired after it is destroyed: the first was dropped by then.
  std::atomic<int> second{0};
  reaper.Retire(std::make_shared<RecordingContext>(&second, nullptr));
  REQUIRE(testing::WaitUntil([&] { return second.load() == 1; }));
  CHECK(destroyed.load() == 0);
  CHECK(kept.use_count() == 1);
  kept.reset();
  CHECK(destroyed.load() == 1);
}

TEST_CASE("The reaper destroys every ring still queued before it goes") {
  std::atomic<int> destroyed{0};
  {
    internal::RingReaper reaper;
    for (int i = 0; i < 50; ++i) {
      reaper.Retire(std::make_shared<RecordingContext>(&destroyed, nullptr));
    }
  }
  CHECK(destroyed.load() == 50);
}

}  // namespace
}  // namespace horovodd
