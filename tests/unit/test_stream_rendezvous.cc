// A worker asks for its rendezvous on its Attach stream (StreamRendezvous) and
// the daemon answers there, instead of with a Rendezvous call of its own: the
// runtime's DaemonClient against horovodd's own WorkerService
// (recording_daemon.h), and against the in-test fake daemon where the stream
// can be broken mid-rendezvous (fake_daemon.h).
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fake_daemon.h"
#include "horovodd.grpc.pb.h"
#include "horovodd/horovodd.h"
#include "recording_daemon.h"
#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_client.h"

namespace horovodd {
namespace {

using testing::RecordingDaemon;

std::unique_ptr<internal::DaemonClient> StartedClient(internal::DaemonClientOptions options) {
  auto client = internal::DaemonClient::Create(std::move(options));
  REQUIRE(client.ok());
  (*client)->StartAttach();
  return std::move(*client);
}

TEST_CASE("a worker's rendezvous is answered on its Attach stream", "[rendezvous]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/1, /*liveness_timeout_s=*/60);
  auto client = StartedClient(daemon.ClientOptions());
  absl::StatusOr<v1::RendezvousResponse> answer = client->Rendezvous(0);
  REQUIRE(answer.status().ToString() == "OK");
  CHECK(answer->generation() >= 1);
  CHECK(answer->rank() == 0);
  CHECK(answer->size() == 1);
  CHECK(answer->local_size() == 1);
  CHECK_FALSE(answer->removed());
  CHECK_FALSE(answer->bind_address().empty());
  client->Stop();
}

TEST_CASE("the daemon's refusal of a rendezvous reaches the caller with its code and message",
          "[rendezvous]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/1, /*liveness_timeout_s=*/60);
  internal::DaemonClientOptions options = daemon.ClientOptions();
  const int64_t stranger = options.worker_id + 7;
  options.worker_id = stranger;  // the job's token, a worker it never launched
  auto client = StartedClient(options);
  absl::StatusOr<v1::RendezvousResponse> answer = client->Rendezvous(0);
  CHECK(answer.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(answer.status().message()),
             Catch::Contains("worker " + std::to_string(stranger) + " is not part of job"));
  CHECK_THAT(
      std::string(answer.status().message()),
      Catch::Contains("rendezvous after generation 0 with the daemon at " + daemon.address()));
  client->Stop();
}

TEST_CASE("a refused Attach stream fails the rendezvous with the daemon's reason", "[rendezvous]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/1, /*liveness_timeout_s=*/60);
  struct Case {
    const char* what;
    std::string job_id, token;
    absl::StatusCode code;
    const char* reason;
  };
  const internal::DaemonClientOptions good = daemon.ClientOptions();
  for (const Case& c : {Case{"a job the daemon does not have", "no-such-job", good.token,
                             absl::StatusCode::kNotFound, "no job 'no-such-job'"},
                        Case{"a token that is not the job's", good.job_id, "not-the-token",
                             absl::StatusCode::kUnauthenticated, ""}}) {
    INFO(c.what);
    internal::DaemonClientOptions options = good;
    options.job_id = c.job_id;
    options.token = c.token;
    auto client = StartedClient(options);
    // Every new stream is refused alike: the wait must end with why. Should
    // it not, Stop() ends it after a generous deadline (CANCELLED: fails).
    auto asked = std::async(std::launch::async, [&] { return client->Rendezvous(0); });
    if (asked.wait_for(std::chrono::seconds(60)) != std::future_status::ready) client->Stop();
    absl::StatusOr<v1::RendezvousResponse> answer = asked.get();
    CHECK(answer.status().code() == c.code);
    CHECK_THAT(std::string(answer.status().message()),
               Catch::Contains(absl::StrCat("its Attach stream was refused: ", c.reason)));
    client->Stop();
  }
}

TEST_CASE("a rendezvous needs the Attach stream: refused before StartAttach", "[rendezvous]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/1, /*liveness_timeout_s=*/60);
  auto client = internal::DaemonClient::Create(daemon.ClientOptions());
  REQUIRE(client.ok());
  absl::StatusOr<v1::RendezvousResponse> answer = (*client)->Rendezvous(0);
  CHECK(answer.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(answer.status().message()), Catch::Contains("StartAttach"));
}

TEST_CASE("a rendezvous before the stream's hello ends the stream", "[rendezvous]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/1, /*liveness_timeout_s=*/60);
  auto channel = grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::WorkerService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + testing::kPatience);
  auto stream = stub->Attach(&context);
  v1::WorkerMessage ask;
  ask.mutable_rendezvous()->set_id(1);
  REQUIRE(stream->Write(ask));
  v1::DaemonMessage message;
  while (stream->Read(&message)) {
  }
  grpc::Status status = stream->Finish();
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(status.error_message(), Catch::Contains("must follow its hello"));
}

TEST_CASE("a rendezvous whose stream breaks is asked again on the next one", "[rendezvous]") {
  testing::FakeDaemon daemon(2);
  daemon.DropNextRendezvousStream();
  // Both workers join generation 1 and allreduce on its ring: the one whose
  // stream broke asked again on its new stream and got its rank.
  auto results = testing::RunWorkers(daemon, 2, [](int w, internal::Runtime&) -> absl::Status {
    std::vector<float> values = {static_cast<float>(w + 1)};
    absl::Status st = Allreduce(ViewOf(values));  // the average, as Horovod's
    if (st.ok() && values[0] != 1.5f) {
      return absl::InternalError("allreduce gave " + std::to_string(values[0]) + ", not 1.5");
    }
    return st;
  });
  testing::RequireAllOk(results);
  CHECK(daemon.dropped_rendezvous_streams() == 1);
}

TEST_CASE("Stop() ends a rendezvous still waiting for its answer", "[rendezvous]") {
  testing::FakeDaemon daemon(2);  // the second worker never comes: no answer
  auto client = StartedClient(daemon.ClientOptions(0));
  absl::StatusOr<v1::RendezvousResponse> answer;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    answer = client->Rendezvous(0);
    returned = true;
  });
  REQUIRE(daemon.WaitAttached(1));
  CHECK_FALSE(returned.load());
  client->Stop();
  waiter.join();
  CHECK(answer.status().code() == absl::StatusCode::kCancelled);
  CHECK_THAT(std::string(answer.status().message()), Catch::Contains("shutting down"));
}

}  // namespace
}  // namespace horovodd
