// The worker runtime against InProcessDaemon (in_process_daemon.h): joining,
// rejoining after an abort, a ring that fails to connect being reported and
// the next generation tried, removal; and the one hook through which the
// runtime may end the process (process_exit.h).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fake_daemon.h"
#include "in_process_daemon.h"
#include "wait_until.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/daemon_client/process_exit.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd {
namespace {

using internal::JoinOutcome;
using internal::Runtime;

std::unique_ptr<Runtime> Connect(testing::InProcessDaemon& daemon, int64_t worker,
                                 absl::Duration ring_timeout = absl::Seconds(60)) {
  internal::RuntimeOptions options;
  options.daemon.address = "in-process";
  options.daemon.worker_id = worker;
  options.connect_daemon = daemon.Connector();
  options.ring_timeout = ring_timeout;
  absl::StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(std::move(options));
  REQUIRE(runtime.ok());
  return *std::move(runtime);
}

// Runs `body(worker)` on one thread per worker and joins them.
template <typename Body>
void OnEveryWorker(int n, Body body) {
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) threads.emplace_back([&body, w] { body(w); });
  for (std::thread& t : threads) t.join();
}

absl::Status Barrier(Runtime& runtime) {
  return runtime.RunCollective([](internal::Communicator& comm) { return comm.Barrier(); });
}

TEST_CASE("runtimes join through an in-process daemon, and rejoin after it aborts") {
  testing::InProcessDaemon daemon(2);
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int w = 0; w < 2; ++w) runtimes.push_back(Connect(daemon, w));

  std::vector<absl::StatusOr<JoinOutcome>> joined(2, absl::UnknownError("not run"));
  std::vector<absl::Status> barriers(2);
  OnEveryWorker(2, [&](int w) {
    joined[w] = runtimes[w]->Join(0);
    if (joined[w].ok()) barriers[w] = Barrier(*runtimes[w]);
  });
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w);
    REQUIRE(joined[w].ok());
    CHECK(*joined[w] == JoinOutcome::kJoined);
    CHECK(runtimes[w]->assignment().generation == 1);
    CHECK(runtimes[w]->assignment().rank == w);
    CHECK(runtimes[w]->assignment().size == 2);
    CHECK(barriers[w].ok());
  }

  // The abort reaches the runtimes through the connection's callback: the
  // old ring refuses collectives, and the next generation (workers swapped)
  // connects a ring of its own.
  daemon.NewGeneration({1, 0});
  for (int w = 0; w < 2; ++w) {
    CHECK(runtimes[w]->newest_generation() == 2);
    CHECK(Barrier(*runtimes[w]).code() == absl::StatusCode::kAborted);
  }
  OnEveryWorker(2, [&](int w) {
    joined[w] = runtimes[w]->Join(1);
    if (joined[w].ok()) barriers[w] = Barrier(*runtimes[w]);
  });
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w);
    REQUIRE(joined[w].ok());
    CHECK(runtimes[w]->assignment().generation == 2);
    CHECK(runtimes[w]->assignment().rank == 1 - w);
    CHECK(barriers[w].ok());
  }
  CHECK(daemon.failures().empty());
  runtimes[0]->ReportCommit(7);
  CHECK(daemon.last_commit(0) == 7);
}

TEST_CASE(
    "a process set has its own ring among its members, and a reset leaves only the "
    "global set") {
  testing::InProcessDaemon daemon(3);
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int w = 0; w < 3; ++w) runtimes.push_back(Connect(daemon, w));
  // Every worker is on this host (the in-process daemon says so): the global
  // ring and the set's run in shared memory, and neither connects a pair.
  const int64_t pairs_before = internal::ProcessRingConnectTotals().pairs_connected;
  std::vector<absl::StatusOr<int>> added(3, absl::UnknownError("not run"));
  std::vector<absl::Status> on_set(3), refused(3);
  OnEveryWorker(3, [&](int w) {
    if (!runtimes[w]->Join(0).ok()) return;
    added[w] = runtimes[w]->AddProcessSet({2, 0}, /*at_init=*/true);
    if (!added[w].ok()) return;
    on_set[w] = runtimes[w]->RunCollective(*added[w], [](internal::Communicator& comm) {
      // The set's ring holds its two members only.
      if (comm.size() != 2) return absl::InternalError("the set's ring has the wrong size");
      return comm.Barrier();
    });
    refused[w] = runtimes[w]->ProcessSetFor(*added[w]).status();
  });
  for (int w = 0; w < 3; ++w) {
    INFO("worker " << w);
    REQUIRE(added[w].ok());
    CHECK(*added[w] == 1);
    CHECK(*runtimes[w]->ProcessSetRanks(1) == std::vector<int>{0, 2});
    CHECK(runtimes[w]->ProcessSetIds() == std::vector<int>{0, 1});
  }
  CHECK(on_set[0].ok());
  CHECK(on_set[2].ok());
  CHECK(internal::ProcessRingConnectTotals().pairs_connected == pairs_before);
  CHECK(refused[1].message() == "rank 1 is not a member of process set 1 (ranks [0, 2])");
  CHECK(refused[0].ok());

  // Without HOROVOD_DYNAMIC_PROCESS_SETS, only sets given at init are taken.
  CHECK(runtimes[0]->AddProcessSet({0, 1}, /*at_init=*/false).status().code() ==
        absl::StatusCode::kFailedPrecondition);

  daemon.NewGeneration({0, 1, 2});
  std::vector<absl::StatusOr<int>> again(3, absl::UnknownError("not run"));
  OnEveryWorker(3, [&](int w) {
    if (!runtimes[w]->Join(1).ok()) return;
    CHECK(runtimes[w]->ProcessSetRanks(1).status().code() == absl::StatusCode::kNotFound);
    CHECK(runtimes[w]->ProcessSetIds() == std::vector<int>{0});
    again[w] = runtimes[w]->AddProcessSet({0, 1}, /*at_init=*/true);
  });
  for (int w = 0; w < 3; ++w) {
    REQUIRE(again[w].ok());
    CHECK(*again[w] == 1);  // ids start over in the new generation
  }
}

TEST_CASE("a ring that cannot connect is reported, and the next generation is tried") {
  // Worker 1 is in generation 1 but never comes: worker 0's ring times out.
  testing::InProcessDaemon daemon(2);
  std::unique_ptr<Runtime> runtime = Connect(daemon, 0, absl::Milliseconds(200));
  absl::StatusOr<JoinOutcome> joined = absl::UnknownError("not run");
  std::thread worker([&] { joined = runtime->Join(0); });
  REQUIRE(daemon.WaitForFailures(1));
  CHECK_THAT(daemon.failures().front(),
             Catch::StartsWith("1: ") && Catch::Contains("DEADLINE_EXCEEDED"));
  daemon.NewGeneration({0}, /*abort=*/false);
  worker.join();
  REQUIRE(joined.ok());
  CHECK(*joined == JoinOutcome::kJoined);
  CHECK(runtime->assignment().generation == 2);
  CHECK(runtime->assignment().size == 1);
  CHECK(Barrier(*runtime).ok());
  CHECK(daemon.failures().size() == 1);
}

TEST_CASE("a worker the daemon removed hears so from Join") {
  testing::InProcessDaemon daemon(1);
  std::unique_ptr<Runtime> runtime = Connect(daemon, 0);
  REQUIRE(runtime->Join(0).ok());
  daemon.NewGeneration({});
  absl::StatusOr<JoinOutcome> outcome = runtime->Join(1);
  REQUIRE(outcome.ok());
  CHECK(*outcome == JoinOutcome::kRemoved);

  // Bound to this thread, the removed runtime's rejoin is NOT_FOUND, never an exit.
  std::atomic<int> exits{0};
  internal::ProcessExitHook previous =
      internal::SetProcessExitHook([&](internal::ExitReason) { ++exits; });
  {
    internal::ScopedThreadRuntime bind(*runtime);
    CHECK(internal::RejoinCurrentRuntime().code() == absl::StatusCode::kNotFound);
  }
  internal::SetProcessExitHook(std::move(previous));
  CHECK(exits == 0);
}

TEST_CASE("the process-exit hook sees every exit the runtime would take") {
  std::atomic<int> removed{0};
  std::atomic<int> lost{0};
  internal::ProcessExitHook previous =
      internal::SetProcessExitHook([&](internal::ExitReason reason) {
        ++(reason == internal::ExitReason::kRemoved ? removed : lost);
      });

  internal::ExitProcess(internal::ExitReason::kRemoved);
  CHECK(removed == 1);
  CHECK(lost == 0);

  SECTION("a daemon client without an on_daemon_lost of its own exits through the hook") {
    testing::FakeDaemon daemon(1);
    auto options = daemon.ClientOptions(0);
    options.heartbeat_interval = absl::Milliseconds(20);
    options.daemon_grace = absl::Milliseconds(300);
    options.on_daemon_lost = nullptr;
    auto client = internal::DaemonClient::Create(options);
    REQUIRE(client.ok());
    (*client)->StartAttach();
    REQUIRE(testing::WaitUntil([&] { return daemon.heartbeats() >= 3; }));
    CHECK(lost == 0);
    daemon.Stop();
    CHECK(testing::WaitUntil([&] { return lost.load() == 1; }));
    (*client)->Stop();
    CHECK(lost == 1);
  }
  internal::SetProcessExitHook(std::move(previous));
}

}  // namespace
}  // namespace horovodd
