// CommunicatorReaper: rings (communicators) handed to it are destroyed on
// its own thread, and none is left undestroyed when it goes.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "wait_until.h"
#include "worker_runtime/comm/communicator_reaper.h"

namespace horovodd {
namespace {

// A communicator that records where and whether it was destroyed; it runs
// no op.
class RecordingContext : public internal::Communicator {
 public:
  RecordingContext(std::atomic<int>* destroyed, std::thread::id* destroyed_on)
      : destroyed_(destroyed), destroyed_on_(destroyed_on) {}
  ~RecordingContext() override {
    if (destroyed_on_ != nullptr) *destroyed_on_ = std::this_thread::get_id();
    destroyed_->fetch_add(1);
  }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status Allreduce(TensorView, const AllreduceOptions&) override { return Unused(); }
  absl::StatusOr<Tensor> Allgather(const TensorView&) override { return Unused(); }
  absl::Status Broadcast(TensorView, int) override { return Unused(); }
  absl::StatusOr<Tensor> Alltoall(const TensorView&, const std::vector<int64_t>&,
                                  std::vector<int64_t>*) override {
    return Unused();
  }
  absl::StatusOr<Tensor> Reducescatter(const TensorView&,
                                       const internal::ReducescatterOptions&) override {
    return Unused();
  }
  absl::Status Adasum(TensorView, double, double) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }
  void Abort() override {}
  absl::Status health() const override { return absl::OkStatus(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("a test's stand-in"); }

  std::atomic<int>* destroyed_;
  std::thread::id* destroyed_on_;
};

TEST_CASE("A retired ring is destroyed on the reaper's thread, not the caller's") {
  std::atomic<int> destroyed{0};
  std::thread::id destroyed_on;
  internal::CommunicatorReaper reaper;
  reaper.Retire(std::make_shared<RecordingContext>(&destroyed, &destroyed_on));
  REQUIRE(testing::WaitUntil([&] { return destroyed.load() == 1; }));
  CHECK(destroyed_on != std::this_thread::get_id());
}

TEST_CASE("A ring someone else still holds outlives its retirement") {
  std::atomic<int> destroyed{0};
  internal::CommunicatorReaper reaper;
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
    internal::CommunicatorReaper reaper;
    for (int i = 0; i < 50; ++i) {
      reaper.Retire(std::make_shared<RecordingContext>(&destroyed, nullptr));
    }
  }
  CHECK(destroyed.load() == 50);
}

}  // namespace
}  // namespace horovodd
