// The heartbeat interval the daemon announces on Attach streams: how it scales
// with the job's size and its liveness timeout (HeartbeatSchedule), that the
// WorkerService puts it in its messages, and that the runtime's DaemonClient
// follows it (within its own grace period) - or keeps its own when the daemon
// says nothing.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/rpc/worker_service.h"
#include "daemon/workers/heartbeat_interval.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"
#include "recording_daemon.h"
#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_client.h"

namespace horovodd {
namespace {

using daemon::HeartbeatInterval;
using daemon::HeartbeatSchedule;
using testing::RecordingDaemon;
using testing::WaitUntil;

// Generous "did not hang" bound for every wait in this file.
constexpr auto kPatience = std::chrono::seconds(60);

TEST_CASE("heartbeat interval: 500 ms for small jobs, scaled so a job sends 2,000/s",
          "[heartbeat]") {
  CHECK(HeartbeatInterval(1, 60) == absl::Milliseconds(500));
  CHECK(HeartbeatInterval(1000, 60) == absl::Milliseconds(500));
  CHECK(HeartbeatInterval(1024, 60) == absl::Milliseconds(512));
  CHECK(HeartbeatInterval(4096, 60) == absl::Milliseconds(2048));
  CHECK(HeartbeatInterval(10000, 60) == absl::Seconds(5));
  // No cap without a liveness timeout.
  CHECK(HeartbeatInterval(100000, 0) == absl::Seconds(50));
}

TEST_CASE("heartbeat interval: at most a quarter of the liveness timeout", "[heartbeat]") {
  CHECK(HeartbeatInterval(10000, 2) == absl::Milliseconds(500));
  CHECK(HeartbeatInterval(10000, 5) == absl::Milliseconds(1250));
  CHECK(HeartbeatInterval(4096, 3) == absl::Milliseconds(750));
  // Below the 500 ms minimum too: the liveness check must see heartbeats.
  CHECK(HeartbeatInterval(2, 0.9) == absl::Milliseconds(225));
  CHECK(HeartbeatInterval(2, 0.001) == absl::Milliseconds(1));
}

TEST_CASE("heartbeat schedule: learns a job at submit (its largest size), forgets it at its end",
          "[heartbeat]") {
  HeartbeatSchedule schedule;
  v1::JobSpec spec = testing::OneLocalWorkerSpec({"true"});
  spec.set_max_np(4096);
  spec.set_liveness_timeout_seconds(60);
  CHECK(schedule.IntervalMs("job-1") == 0);
  schedule.OnJobSubmitted("job-1", spec, absl::Now(), "");
  CHECK(schedule.IntervalMs("job-1") == 2048);
  CHECK(schedule.IntervalMs("job-2") == 0);

  v1::JobEvent event;
  event.set_kind(v1::JobEvent::MEMBERSHIP);
  schedule.OnJobEvent("job-1", event);
  CHECK(schedule.IntervalMs("job-1") == 2048);
  event.set_kind(v1::JobEvent::JOB_ENDED);
  schedule.OnJobEvent("job-1", event);
  CHECK(schedule.IntervalMs("job-1") == 0);
}

// The interval a worker runtime with `options` heartbeats at: before it
// attaches (`before`, when not null) and once the daemon's first message
// arrived.
absl::Duration IntervalAfterFirstMessage(internal::DaemonClientOptions options,
                                         absl::Duration* before = nullptr) {
  std::atomic<int> messages{0};
  options.on_message = [&](int64_t, bool) { messages.fetch_add(1); };
  auto client = internal::DaemonClient::Create(options);
  REQUIRE(client.ok());
  if (before != nullptr) *before = (*client)->heartbeat_interval();
  (*client)->StartAttach();
  REQUIRE(WaitUntil([&] { return messages.load() > 0; }));
  const absl::Duration interval = (*client)->heartbeat_interval();
  (*client)->Stop();
  return interval;
}

TEST_CASE("a big job's workers follow the interval the daemon announces", "[heartbeat]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/4096, /*liveness_timeout_s=*/60);
  absl::Duration before;
  CHECK(IntervalAfterFirstMessage(daemon.ClientOptions(), &before) == absl::Milliseconds(2048));
  CHECK(before == absl::Milliseconds(500));  // its own, until told
}

TEST_CASE("a worker heartbeats at least four times per grace period, whatever the daemon says",
          "[heartbeat]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/10000, /*liveness_timeout_s=*/60);
  internal::DaemonClientOptions options = daemon.ClientOptions();
  options.daemon_grace = absl::Seconds(8);
  // The daemon asks for 5 s.
  CHECK(IntervalAfterFirstMessage(options) == absl::Seconds(2));
}

TEST_CASE("a worker keeps its own interval when the daemon announces none", "[heartbeat]") {
  RecordingDaemon daemon(/*announce=*/false, /*max_np=*/4096, /*liveness_timeout_s=*/60);
  internal::DaemonClientOptions options = daemon.ClientOptions();
  options.heartbeat_interval = absl::Milliseconds(300);
  CHECK(IntervalAfterFirstMessage(options) == absl::Milliseconds(300));
}

TEST_CASE("the announced interval is in every message of the Attach stream", "[heartbeat]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/4096, /*liveness_timeout_s=*/3);
  internal::DaemonClientOptions options = daemon.ClientOptions();
  auto channel = grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials());
  auto stub = v1::WorkerService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kPatience);
  auto stream = stub->Attach(&context);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_job_id(options.job_id);
  hello.mutable_hello()->set_worker_id(options.worker_id);
  hello.mutable_hello()->set_token(options.token);
  REQUIRE(stream->Write(hello));
  v1::DaemonMessage message;
  REQUIRE(stream->Read(&message));
  // 4,096 workers would ask for 2,048 ms; a quarter of the 3 s liveness timeout wins.
  CHECK(message.heartbeat_interval_ms() == 750);
  CHECK(message.generation() >= 1);
  context.TryCancel();
  stream->Finish();
}

}  // namespace
}  // namespace horovodd
