// The rounds in a host's shared memory record whom they wait for
// (comm/peer_wait.h), as the TCP ring's receives do: a rank in a Sync names
// the first peer not arrived yet, the next one once that one arrives (the
// wait keeps its start), and nothing once every peer has. Through
// ShmCommunicator, the ring's record is the group's. Ranks are threads of
// this process, each with its own ShmGroup over one segment.
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "shm_test_support.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd {
namespace {

using internal::PeerWait;
using internal::shm::ShmGroup;
using testing::AllLocal;
using testing::ConnectLocal;
using testing::Deadline;
using testing::MakeGroups;
using testing::OnEveryRank;
using testing::RankGroup;
using testing::SeenWaitingFor;

TEST_CASE("a shm Sync names the peer not arrived yet, then the next, then none",
          "[shm][peer_wait]") {
  std::vector<std::unique_ptr<ShmGroup>> groups = MakeGroups(3, 4096);
  PeerWait waits;
  groups[0]->set_peer_wait(&waits);
  CHECK_FALSE(waits.Current().has_value());

  // Rank 0 arrives first; rank 1 comes once rank 0 is seen waiting for it,
  // rank 2 once rank 0 is seen waiting for rank 2.
  const absl::Time before = absl::Now();
  std::optional<PeerWait::Waiting> for_1, for_2;
  absl::Notification saw_1, saw_2;
  std::thread watcher([&] {
    for_1 = SeenWaitingFor(waits, 1);
    saw_1.Notify();
    for_2 = SeenWaitingFor(waits, 2);
    saw_2.Notify();
  });
  std::vector<absl::Status> done = OnEveryRank<absl::Status>(3, [&](int rank) {
    if (rank == 1) saw_1.WaitForNotificationWithTimeout(absl::Seconds(20));
    if (rank == 2) saw_2.WaitForNotificationWithTimeout(absl::Seconds(20));
    return groups[rank]->Sync(Deadline());
  });
  watcher.join();
  for (const absl::Status& s : done) CHECK(s.ok());
  REQUIRE(for_1.has_value());
  REQUIRE(for_2.has_value());
  CHECK(for_1->since >= before - absl::Milliseconds(1));
  CHECK(for_1->since <= absl::Now());
  CHECK(for_2->since == for_1->since);  // one wait: its start stays
  // Every peer arrived: it waits for no one.
  CHECK_FALSE(waits.Current().has_value());
}

TEST_CASE("a rank of an all-local communicator names the local peer its barrier waits for",
          "[shm][peer_wait]") {
  gloo::rendezvous::HashStore store;
  RankGroup ring(store, "shm-peer-wait", 2);
  auto waits = std::make_shared<PeerWait>();
  ring.context(1).set_peer_wait(waits);
  testing::Comms comms = ConnectLocal(ring, 1, internal::HierarchicalAllreduce::kOff, 4096);
  REQUIRE(AllLocal(*comms[0]));

  // Rank 0 enters the barrier only once rank 1 has been seen waiting for it.
  absl::Notification seen;
  std::optional<PeerWait::Waiting> observed;
  std::thread watcher([&] {
    observed = SeenWaitingFor(*waits, 0);
    seen.Notify();
  });
  std::vector<absl::Status> done = OnEveryRank<absl::Status>(2, [&](int rank) {
    if (rank == 0) seen.WaitForNotificationWithTimeout(absl::Seconds(20));
    return comms[rank]->Barrier();
  });
  watcher.join();
  CHECK(done[0].ok());
  CHECK(done[1].ok());
  CHECK(observed.has_value());
  CHECK_FALSE(waits->Current().has_value());
}

}  // namespace
}  // namespace horovodd
