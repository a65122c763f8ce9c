// The global ring's receives record whom they wait for (comm/peer_wait.h),
// for the daemon's stall detector: a rank blocked in a receive names its
// peer while it waits, and nothing once the data arrived. The engine's
// negotiation rounds too: a link that stalls one way leaves one end waiting
// for the other's part of a round (stall_detector.cc names such a pair).
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_negotiator.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd {
namespace {

using testing::OnEveryRank;
using testing::RankGroup;

// Polls `waits` on a thread of its own until it names a peer (or 20 s
// passed); AwaitSeen returns then.
class WaitWatcher {
 public:
  explicit WaitWatcher(const internal::PeerWait& waits)
      : thread_([this, &waits] {
          const absl::Time deadline = absl::Now() + absl::Seconds(20);
          while (absl::Now() < deadline) {
            observed_ = waits.Current();
            if (observed_.has_value()) break;
            absl::SleepFor(absl::Milliseconds(1));
          }
          seen_.Notify();
        }) {}
  ~WaitWatcher() { thread_.join(); }

  void AwaitSeen() { seen_.WaitForNotificationWithTimeout(absl::Seconds(30)); }
  const std::optional<internal::PeerWait::Waiting>& observed() const { return observed_; }

 private:
  std::optional<internal::PeerWait::Waiting> observed_;
  absl::Notification seen_;
  std::thread thread_;
};

TEST_CASE("a receive names the peer it waits for while it waits", "[collectives][peer_wait]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "peer-wait", 2);
  auto waits = std::make_shared<internal::PeerWait>();
  group.context(1).set_peer_wait(waits);
  CHECK_FALSE(waits->Current().has_value());

  // Rank 0 broadcasts only once rank 1 has been seen waiting for it.
  const absl::Time before = absl::Now();
  std::optional<WaitWatcher> watcher;
  watcher.emplace(*waits);
  std::vector<absl::Status> done = OnEveryRank<absl::Status>(2, [&](int rank) {
    Tensor value(DType::kInt32, {4});
    for (int i = 0; i < 4; ++i) static_cast<int32_t*>(value.data())[i] = rank == 0 ? 7 : 0;
    if (rank == 0) watcher->AwaitSeen();
    return internal::Broadcast(group.context(rank), value.view(), 0);
  });
  const std::optional<internal::PeerWait::Waiting> observed = watcher->observed();
  watcher.reset();
  CHECK(done[0].ok());
  CHECK(done[1].ok());
  REQUIRE(observed.has_value());
  CHECK(observed->rank == 0);
  CHECK(observed->since >= before - absl::Milliseconds(1));
  CHECK(observed->since <= absl::Now());
  // The data arrived: it waits for no one.
  CHECK_FALSE(waits->Current().has_value());
}

// Every round after the first is read from receives an earlier round posted
// (GlooNegotiator::EndRound posts the next one's): those name their peer too.
TEST_CASE("a negotiation round names the peer whose part has not arrived, round after round",
          "[collectives][peer_wait]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "negotiation-wait", 2);
  auto waits = std::make_shared<internal::PeerWait>();
  group.context(1).set_peer_wait(waits);
  internal::GlooNegotiator negotiators[2] = {internal::GlooNegotiator(group.context(0)),
                                             internal::GlooNegotiator(group.context(1))};
  constexpr size_t kHeaderBytes = 8;
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    std::optional<WaitWatcher> watcher;
    watcher.emplace(*waits);
    // Rank 0 starts its round only once rank 1 has been seen waiting for it.
    std::vector<int> heard[2];
    std::vector<absl::Status> done = OnEveryRank<absl::Status>(2, [&](int rank) -> absl::Status {
      if (rank == 0) watcher->AwaitSeen();
      internal::Negotiator& negotiator = negotiators[rank];
      absl::StatusOr<internal::Negotiator::PartBuffer> part = negotiator.StartRound(kHeaderBytes);
      if (!part.ok()) return part.status();
      part->data[0] = static_cast<uint8_t>(10 * round + rank);
      if (absl::Status posted = negotiator.Post(kHeaderBytes); !posted.ok()) return posted;
      if (absl::Status collected = negotiator.Collect([&](int r) { heard[rank].push_back(r); });
          !collected.ok()) {
        return collected;
      }
      if (negotiator.Part(1 - rank)[0] != 10 * round + 1 - rank) {
        return absl::InternalError("a peer's part is not what it wrote");
      }
      return negotiator.EndRound(kHeaderBytes);
    });
    const std::optional<internal::PeerWait::Waiting> observed = watcher->observed();
    watcher.reset();
    CHECK(done[0].ok());
    CHECK(done[1].ok());
    CHECK(heard[0] == std::vector<int>{1});
    CHECK(heard[1] == std::vector<int>{0});
    REQUIRE(observed.has_value());
    CHECK(observed->rank == 0);
    // The part arrived: it waits for no one.
    CHECK_FALSE(waits->Current().has_value());
  }
}

}  // namespace
}  // namespace horovodd
