// A local peer that dies (worker_runtime/shm): the waits of the ranks left
// end with UNAVAILABLE naming it, through the pidfds each rank watches (its
// two neighbours', published in the segment). Ranks are threads of this
// process; the peer that dies is a real child process (ForkIdlePeer).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "shm_test_support.h"
#include "worker_runtime/shm/peer_watch.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/shm/shm_group.h"
#include "worker_runtime/shm/shm_negotiation.h"

namespace horovodd {
namespace {

using internal::shm::GroupOptions;
using internal::shm::NegotiationChannel;
using internal::shm::PeerWatch;
using internal::shm::ShmGroup;
using testing::Deadline;
using testing::ForkIdlePeer;
using testing::MakeGroups;

TEST_CASE("a local peer that exits is noticed by a rank waiting for it") {
  const pid_t child = ForkIdlePeer();
  auto groups = MakeGroups(2, 1024, {getpid(), child});
  std::thread killer([child] {
    absl::SleepFor(absl::Milliseconds(50));
    kill(child, SIGKILL);
  });
  absl::Status status = internal::shm::Barrier(*groups[0], Deadline());
  killer.join();
  int child_status = 0;
  waitpid(child, &child_status, 0);
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(status.message()).find("exited") != std::string::npos);
}

TEST_CASE("a negotiation round ends when the peer it waits for exits") {
  const pid_t child = ForkIdlePeer();
  GroupOptions options;
  options.size = 2;
  options.slot_bytes = 1024;
  options.pids = {getpid(), child};
  auto group = ShmGroup::Create(options);
  REQUIRE(group.ok());
  NegotiationChannel channel(**group);
  channel.Publish(0);
  absl::Status collected;
  std::thread waiter([&] { collected = channel.Collect(Deadline(), [](int) {}); });
  kill(child, SIGKILL);
  waiter.join();
  int child_status = 0;
  waitpid(child, &child_status, 0);
  CHECK(collected.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("ranks asleep in a wait wake when a local peer is SIGKILLed") {
  // Ranks 0 and 1 are threads here; rank 2 is a child process that never
  // arrives. Each thread's group watches the child's pidfd.
  const pid_t child = ForkIdlePeer();
  auto groups = MakeGroups(3, 1024, {getpid(), getpid(), child});
  REQUIRE(groups.size() == 2);

  // The op deadline is far away: only the peer's death can end the waits.
  const absl::Time far = absl::Now() + absl::Minutes(10);
  std::vector<absl::Status> waited(2);
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int r = 0; r < 2; ++r) {
    waiters.emplace_back([&, r] {
      waited[r] = internal::shm::Barrier(*groups[r], far);
      ++returned;
    });
  }
  const absl::Time patience = absl::Now() + absl::Seconds(60);
  while (groups[0]->sleepers() < 2 && absl::Now() < patience) absl::SleepFor(absl::Milliseconds(5));
  CHECK(groups[0]->sleepers() == 2);
  CHECK(returned == 0);
  kill(child, SIGKILL);
  while (returned < 2 && absl::Now() < patience) absl::SleepFor(absl::Milliseconds(5));
  const bool woke = returned == 2;
  if (!woke) groups[0]->Abort();  // do not leave the test hanging on a failure
  for (std::thread& t : waiters) t.join();
  int child_status = 0;
  waitpid(child, &child_status, 0);
  REQUIRE(woke);
  for (const absl::Status& status : waited) {
    CHECK(status.code() == absl::StatusCode::kUnavailable);
    CHECK(std::string(status.message())
              .find("local rank 2 (pid " + std::to_string(child) + ") exited") !=
          std::string::npos);
  }
  // And every later op fails at once, with the same reason.
  CHECK(internal::shm::Barrier(*groups[1], far).code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("each rank watches its two neighbours only, and a killed peer still wakes every rank") {
  // Ranks 0, 1, 4 and 5 are threads here; ranks 2 and 3 are children that
  // never arrive. Rank 3 is watched by rank 4 alone: ranks 0 and 5 watch no
  // one (their neighbours are this process) and learn it through the group.
  const pid_t child2 = ForkIdlePeer();
  const pid_t child3 = ForkIdlePeer();
  const pid_t self = getpid();
  GroupOptions options;
  options.size = 6;
  options.slot_bytes = 1024;
  options.pids = {self, self, child2, child3, self, self};
  std::vector<std::unique_ptr<ShmGroup>> groups(6);
  auto leader = ShmGroup::Create(options);
  REQUIRE(leader.ok());
  groups[0] = *std::move(leader);
  for (int r : {1, 4, 5}) {
    options.rank = r;
    auto peer = ShmGroup::Attach(options, self, groups[0]->segment().fd());
    REQUIRE(peer.ok());
    groups[r] = *std::move(peer);
  }
  groups[0]->segment().CloseFd();
  CHECK(groups[0]->Neighbours() == std::vector<int>{5, 1});
  CHECK(groups[4]->Neighbours() == std::vector<int>{3, 5});
  CHECK(groups[0]->watched_peers() == 0);
  CHECK(groups[1]->watched_peers() == 1);
  CHECK(groups[4]->watched_peers() == 1);
  CHECK(groups[5]->watched_peers() == 0);

  const absl::Time far = absl::Now() + absl::Minutes(10);
  const std::vector<int> threads = {0, 1, 4, 5};
  std::vector<absl::Status> waited(6);
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int r : threads) {
    waiters.emplace_back([&, r] {
      waited[r] = internal::shm::Barrier(*groups[r], far);
      ++returned;
    });
  }
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(returned == 0);
  kill(child3, SIGKILL);
  const absl::Time patience = absl::Now() + absl::Seconds(60);
  while (returned < 4 && absl::Now() < patience) absl::SleepFor(absl::Milliseconds(5));
  const bool woke = returned == 4;
  if (!woke) groups[0]->Abort();
  for (std::thread& t : waiters) t.join();
  kill(child2, SIGKILL);
  for (pid_t child : {child2, child3}) {
    int child_status = 0;
    waitpid(child, &child_status, 0);
  }
  REQUIRE(woke);
  for (int r : threads) {
    INFO("rank " << r);
    CHECK(waited[r].code() == absl::StatusCode::kUnavailable);
    CHECK(std::string(waited[r].message())
              .find("local rank 3 (pid " + std::to_string(child3) + ") exited") !=
          std::string::npos);
  }
}

TEST_CASE("a group set up without pids watches the neighbours' published ones") {
  // Rank 1 of 3 is a child process that maps the segment (publishing its
  // pid there) and then idles; ranks 0 and 2 are threads here, given no
  // pids at all, as a host whose layout came from the daemon is.
  GroupOptions options;
  options.size = 3;
  options.slot_bytes = 1024;
  options.pids = {0, 0, 0};
  auto leader = ShmGroup::Create(options);
  REQUIRE(leader.ok());
  std::unique_ptr<ShmGroup> group0 = *std::move(leader);
  const int fd = group0->segment().fd();
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    GroupOptions mine = options;
    mine.rank = 1;
    auto attached = ShmGroup::Attach(mine, parent, fd);
    const char ok = attached.ok() ? 1 : 0;
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char child_ok = 0;
  REQUIRE(read(ready[0], &child_ok, 1) == 1);
  close(ready[0]);
  options.rank = 2;
  auto attached = ShmGroup::Attach(options, parent, fd);
  REQUIRE(attached.ok());
  std::unique_ptr<ShmGroup> group2 = *std::move(attached);
  group0->segment().CloseFd();
  CHECK(group0->watched_peers() == 0);
  group0->WatchNeighbours();
  group2->WatchNeighbours();
  CHECK(group0->watched_peers() == 1);  // rank 2 is this process
  CHECK(group2->watched_peers() == 1);

  std::vector<absl::Status> waited(3);
  std::thread waiter([&] { waited[2] = internal::shm::Barrier(*group2, Deadline()); });
  waited[0] = [&] {
    absl::SleepFor(absl::Milliseconds(50));
    kill(child, SIGKILL);
    return internal::shm::Barrier(*group0, Deadline());
  }();
  waiter.join();
  int child_status = 0;
  waitpid(child, &child_status, 0);
  REQUIRE(child_ok == 1);
  for (int r : {0, 2}) {
    INFO("rank " << r);
    CHECK(waited[r].code() == absl::StatusCode::kUnavailable);
    CHECK(std::string(waited[r].message())
              .find("local rank 1 (pid " + std::to_string(child) + ") exited") !=
          std::string::npos);
  }
}

TEST_CASE("a forked child dropping its copy of a group leaves the parent's watch running") {
  const pid_t peer = ForkIdlePeer();
  auto groups = MakeGroups(2, 1024, {getpid(), peer});
  // As a worker's forked helper (a data loader) that ends by running its
  // destructors: its copy of the watch must not stop ours.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    groups.clear();
    _exit(0);
  }
  int child_status = 0;
  waitpid(child, &child_status, 0);
  CHECK((WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0));
  kill(peer, SIGKILL);
  int peer_status = 0;
  waitpid(peer, &peer_status, 0);
  absl::Status status = internal::shm::Barrier(*groups[0], Deadline());
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(status.message()).find("exited") != std::string::npos);
}

TEST_CASE("a watch turned to a new set reports the new set's exits and no longer the old one's") {
  // As a peer's set-up turns its watch from the leader to its neighbours:
  // the leader (index 0 here) dying afterwards is not this watch's to report.
  const pid_t old_peer = ForkIdlePeer();
  const pid_t new_peer = ForkIdlePeer();
  absl::Mutex mu;
  std::vector<int> reported;
  auto watch = PeerWatch::Start({old_peer, 0}, [&](int index) {
    absl::MutexLock lock(&mu);
    reported.push_back(index);
  });
  REQUIRE(watch != nullptr);
  CHECK(watch->size() == 1);
  watch->Rewatch({0, new_peer});
  CHECK(watch->size() == 1);
  // The old peer dies first and is reaped: were it still watched, its pidfd
  // would be readable before the new peer's ever is.
  int status = 0;
  kill(old_peer, SIGKILL);
  waitpid(old_peer, &status, 0);
  kill(new_peer, SIGKILL);
  waitpid(new_peer, &status, 0);
  const auto one_reported = [&] { return !reported.empty(); };
  {
    absl::MutexLock lock(&mu);
    CHECK(mu.AwaitWithTimeout(absl::Condition(&one_reported), absl::Seconds(60)));
  }
  watch.reset();  // joins the thread: nothing is reported after this
  CHECK(reported == std::vector<int>{1});
}

TEST_CASE("a watch turned to no one keeps quiet and stops when dropped") {
  const pid_t peer = ForkIdlePeer();
  std::atomic<int> reports{0};
  auto watch = PeerWatch::Start({peer}, [&](int) { ++reports; });
  REQUIRE(watch != nullptr);
  watch->Rewatch({0, 0});
  CHECK(watch->size() == 0);
  // A second set before the thread took the first: the last one given wins.
  watch->Rewatch({peer, 0});
  watch->Rewatch({0});
  CHECK(watch->size() == 0);
  kill(peer, SIGKILL);
  int status = 0;
  waitpid(peer, &status, 0);
  watch.reset();
  CHECK(reports == 0);
}

}  // namespace
}  // namespace horovodd
