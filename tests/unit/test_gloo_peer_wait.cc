// The global ring's receives record whom they wait for (comm/peer_wait.h),
// for the daemon's stall detector: a rank blocked in a receive names its
// peer while it waits, and nothing once the data arrived.
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_ops.h"

namespace horovodd {
namespace {

using testing::OnEveryRank;
using testing::RankGroup;

TEST_CASE("a receive names the peer it waits for while it waits", "[collectives][peer_wait]") {
  gloo::rendezvous::HashStore store;
  RankGroup group(store, "peer-wait", 2);
  auto waits = std::make_shared<internal::PeerWait>();
  group.context(1).set_peer_wait(waits);
  CHECK_FALSE(waits->Current().has_value());

  // Rank 0 broadcasts only once rank 1 has been seen waiting for it.
  absl::Notification seen;
  std::optional<internal::PeerWait::Waiting> observed;
  const absl::Time before = absl::Now();
  std::thread watcher([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      observed = waits->Current();
      if (observed.has_value()) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    seen.Notify();
  });
  std::vector<absl::Status> done = OnEveryRank<absl::Status>(2, [&](int rank) {
    Tensor value(DType::kInt32, {4});
    for (int i = 0; i < 4; ++i) static_cast<int32_t*>(value.data())[i] = rank == 0 ? 7 : 0;
    if (rank == 0) seen.WaitForNotificationWithTimeout(absl::Seconds(20));
    return internal::Broadcast(group.context(rank), value.view(), 0);
  });
  watcher.join();
  CHECK(done[0].ok());
  CHECK(done[1].ok());
  REQUIRE(observed.has_value());
  CHECK(observed->rank == 0);
  CHECK(observed->since >= before - absl::Milliseconds(1));
  CHECK(observed->since <= absl::Now());
  // The data arrived: it waits for no one.
  CHECK_FALSE(waits->Current().has_value());
}

}  // namespace
}  // namespace horovodd
