// The worker runtime's plumbing against a fake daemon (fake_daemon.h):
// Init's errors outside a job, the daemon-backed Gloo store, the daemon
// client's heartbeats and its giving up, and a daemon abort waking a
// collective blocked on a silent peer; and a job's ranks ending at once.
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/common/error.h>

#include "fake_daemon.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/daemon_client/daemon_client.h"
#include "worker_runtime/daemon_client/daemon_kv_store.h"
#include "worker_runtime/kv_client/gloo_kv_store.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd {
namespace {

using internal::Runtime;
using testing::WaitUntil;

TEST_CASE("Init outside a horovodd job names the missing variable") {
  unsetenv("HOROVODD_DAEMON_ADDR");
  unsetenv("HOROVODD_JOB_ID");
  unsetenv("HOROVODD_WORKER_ID");
  absl::Status status = Init();
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message().find("HOROVODD_DAEMON_ADDR") != std::string::npos);
  CHECK(status.message().find("not launched by horovodrun") != std::string::npos);
  CHECK_FALSE(IsInitialized());

  setenv("HOROVODD_DAEMON_ADDR", "127.0.0.1:1", 1);
  status = Init();
  CHECK(status.message().find("HOROVODD_JOB_ID") != std::string::npos);

  setenv("HOROVODD_JOB_ID", "job-1", 1);
  setenv("HOROVODD_WORKER_ID", "seven", 1);
  status = Init();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message().find("HOROVODD_WORKER_ID") != std::string::npos);
  CHECK(status.message().find("'seven'") != std::string::npos);
  for (const char* name : {"HOROVODD_DAEMON_ADDR", "HOROVODD_JOB_ID", "HOROVODD_WORKER_ID"}) {
    unsetenv(name);
  }

  std::vector<float> values = {1};
  CHECK(Allreduce(ViewOf(values)).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Rank() == -1);
}

TEST_CASE("The daemon-backed Gloo store sets, waits for and gets keys through the daemon") {
  testing::FakeDaemon daemon(1);
  auto client = internal::DaemonClient::Create(daemon.ClientOptions(0));
  REQUIRE(client.ok());
  internal::DaemonKvStore keys(**client, 1);
  internal::GlooKvStore writer(keys, absl::Seconds(60));
  internal::GlooKvStore reader(keys, absl::Seconds(60));

  std::thread late_writer([&] { writer.set("late", {'o', 'k'}); });
  reader.wait({"late"});
  late_writer.join();
  CHECK(reader.get("late") == std::vector<char>{'o', 'k'});

  writer.set("addr", {'\0', 'x'});
  CHECK(reader.get("addr") == std::vector<char>{'\0', 'x'});

  SECTION("a key that never comes times out with an I/O error naming it") {
    internal::GlooKvStore impatient(keys, absl::Milliseconds(200));
    try {
      impatient.wait({"never"}, std::chrono::milliseconds(200));
      FAIL("wait returned without the key");
    } catch (const gloo::IoException& e) {
      CHECK(std::string(e.what()).find("never") != std::string::npos);
      CHECK(std::string(e.what()).find("timeout") != std::string::npos);
    }
    CHECK_FALSE(impatient.superseded());
  }

  SECTION("a superseded generation makes the store throw and say so") {
    std::thread bump([&] { daemon.NewGeneration(/*abort=*/true); });
    CHECK_THROWS_AS(reader.get("never"), gloo::IoException);
    bump.join();
    CHECK(reader.superseded());
    CHECK_THROWS_AS(writer.set("k", {'v'}), gloo::IoException);
  }
}

TEST_CASE("The daemon client heartbeats, and gives up on a daemon that is gone") {
  testing::FakeDaemon daemon(1);
  std::atomic<bool> lost{false};
  auto options = daemon.ClientOptions(0);
  options.heartbeat_interval = absl::Milliseconds(20);
  options.daemon_grace = absl::Milliseconds(500);
  options.on_daemon_lost = [&] { lost = true; };
  auto client = internal::DaemonClient::Create(options);
  REQUIRE(client.ok());
  (*client)->StartAttach();
  // 60 heartbeats span more than twice the grace period.
  REQUIRE(WaitUntil([&] { return daemon.heartbeats() >= 60; }));
  CHECK_FALSE(lost.load());
  daemon.Stop();
  CHECK(WaitUntil([&] { return lost.load(); }));
}

TEST_CASE("A collective blocked on a silent peer returns ABORTED when the daemon aborts") {
  testing::FakeDaemon daemon(2);
  std::atomic<bool> entering{false}, returned{false};
  auto results = testing::RunWorkers(daemon, 2, [&](int w, Runtime&) -> absl::Status {
    std::vector<float> values = {1};
    if (w == 0) {
      // Worker 1 never joins this allreduce; only the abort can end it early.
      entering = true;
      absl::Status blocked = Allreduce(ViewOf(values));
      returned = true;
      absl::Status next = Allreduce(ViewOf(values));
      if (blocked.code() != absl::StatusCode::kAborted ||
          next.code() != absl::StatusCode::kAborted) {
        return absl::InternalError("expected ABORTED twice, got " + blocked.ToString() + " then " +
                                   next.ToString());
      }
      return absl::OkStatus();
    }
    // Only the blocked worker hears the abort (its peer is the silent one),
    // sent once it is about to block (the message takes far longer to arrive).
    WaitUntil([&] { return entering.load(); });
    daemon.WaitAttached(2);
    daemon.Announce(0, 2, /*abort=*/true);
    // Well below the 120 s ring timeout: the abort, not a timeout, ended it.
    return WaitUntil([&] { return returned.load(); })
               ? absl::OkStatus()
               : absl::DeadlineExceededError("worker 0 still blocked in its allreduce");
  });
  testing::RequireAllOk(results);
}

TEST_CASE("Every rank completes the job's last collective though ranks end right after it") {
  // Each rank's runtime ends as soon as its own part is done. A rank that
  // closed its ring while a peer still read the last broadcast would make it
  // fail (a connection closed with bytes unread is reset, and the reset
  // throws away what the peer had not read): ~Runtime meets the peers first.
  for (int job = 0; job < 20; ++job) {
    testing::FakeDaemon daemon(4);
    // As an elastic state's sync at the end: agree on a root, then take its values.
    auto results = testing::RunWorkers(daemon, 4, [](int, Runtime&) -> absl::Status {
      std::vector<int64_t> commits = {Rank() == 1 ? 5 : 2};
      AllreduceOptions max;
      max.op = ReduceOp::kMax;
      if (absl::Status st = Allreduce(ViewOf(commits), max); !st.ok()) return st;
      std::vector<int64_t> value = {Rank() == 1 ? 1001 : 0};
      if (absl::Status st = Broadcast(ViewOf(value), 1); !st.ok()) return st;
      return commits[0] == 5 && value[0] == 1001
                 ? absl::OkStatus()
                 : absl::DataLossError("wrong values after the last collectives");
    });
    INFO("job " << job);
    testing::RequireAllOk(results);
  }
}

}  // namespace
}  // namespace horovodd
