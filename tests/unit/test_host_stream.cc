// A host's workers on one AttachHost stream (horovodd.proto: HostMessage):
// the batching of what the daemon writes to a host (HostOutbox), and
// horovodd's own WorkerService relaying several workers' hellos,
// rendezvous, heartbeats and generations on one stream, beside a worker on
// its own Attach stream (recording_daemon.h: a launcher that records).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "daemon/rpc/host_outbox.h"
#include "daemon/workers/worker_channel.h"
#include "horovodd.grpc.pb.h"
#include "recording_daemon.h"
#include "wait_until.h"

namespace horovodd {
namespace {

using daemon::HostOutbox;
using testing::RecordingDaemon;
using testing::WaitUntil;

v1::DaemonMessage Generation(int64_t generation) {
  v1::DaemonMessage message;
  message.set_generation(generation);
  return message;
}

TEST_CASE("a host outbox writes at once when idle and batches while a write is in flight",
          "[host_stream]") {
  HostOutbox outbox;
  outbox.set_heartbeat_interval_ms(750);
  const v1::HostDaemonMessage* first = outbox.Add(1, Generation(2));
  REQUIRE(first != nullptr);
  CHECK(first->workers_size() == 1);
  CHECK(first->workers(0).worker_id() == 1);
  CHECK(first->workers(0).message().generation() == 2);
  CHECK(first->heartbeat_interval_ms() == 750);
  CHECK(outbox.writing());
  // The host's other workers hear of it in one batch, in order.
  for (int64_t w = 2; w <= 8; ++w) CHECK(outbox.Add(w, Generation(2)) == nullptr);
  CHECK(outbox.queued() == 7);
  CHECK(outbox.Echo() == nullptr);  // the write in flight answers the heartbeats
  const v1::HostDaemonMessage* second = outbox.WriteDone();
  REQUIRE(second != nullptr);
  REQUIRE(second->workers_size() == 7);
  for (int i = 0; i < 7; ++i) CHECK(second->workers(i).worker_id() == i + 2);
  CHECK(second->heartbeat_interval_ms() == 750);
  CHECK(outbox.queued() == 0);
  CHECK(outbox.WriteDone() == nullptr);
  CHECK_FALSE(outbox.writing());
}

TEST_CASE("a host outbox answers a heartbeat round with one empty batch", "[host_stream]") {
  HostOutbox outbox;
  const v1::HostDaemonMessage* echo = outbox.Echo();
  REQUIRE(echo != nullptr);
  CHECK(echo->workers_size() == 0);
  CHECK(outbox.Echo() == nullptr);
  // A message queued behind the echo goes in the next write.
  CHECK(outbox.Add(3, Generation(1)) == nullptr);
  const v1::HostDaemonMessage* next = outbox.WriteDone();
  REQUIRE(next != nullptr);
  CHECK(next->workers_size() == 1);
}

TEST_CASE("a host outbox holds messages until flushed, in one batch", "[host_stream]") {
  HostOutbox outbox;
  for (int64_t w = 1; w <= 8; ++w) outbox.Hold(w, Generation(4));
  CHECK_FALSE(outbox.writing());
  CHECK(outbox.queued() == 8);
  const v1::HostDaemonMessage* batch = outbox.Flush();
  REQUIRE(batch != nullptr);
  CHECK(batch->workers_size() == 8);
  CHECK(outbox.Flush() == nullptr);  // a write is in flight
  // Held behind a write in flight: the next write takes them.
  outbox.Hold(9, Generation(5));
  CHECK(outbox.Flush() == nullptr);
  const v1::HostDaemonMessage* next = outbox.WriteDone();
  REQUIRE(next != nullptr);
  CHECK(next->workers_size() == 1);
  CHECK(outbox.WriteDone() == nullptr);
  CHECK(outbox.Flush() == nullptr);  // nothing held
}

TEST_CASE("a write finishing while messages are held does not take them", "[host_stream]") {
  // A generation's answers held for one write while an earlier write (a
  // welcome) finishes: they wait for the flush, and go out together.
  HostOutbox outbox;
  REQUIRE(outbox.Add(1, Generation(3)) != nullptr);
  outbox.Hold(2, Generation(4));
  outbox.Hold(3, Generation(4));
  CHECK(outbox.WriteDone() == nullptr);
  CHECK(outbox.queued() == 2);
  const v1::HostDaemonMessage* batch = outbox.Flush();
  REQUIRE(batch != nullptr);
  CHECK(batch->workers_size() == 2);
}

TEST_CASE("a channel batch runs what was deferred once its outermost scope closes",
          "[host_stream]") {
  CHECK(daemon::ChannelBatch::Current() == nullptr);
  std::vector<int> flushed;
  {
    daemon::ChannelBatch outer;
    CHECK(daemon::ChannelBatch::Current() == &outer);
    {
      daemon::ChannelBatch inner;
      CHECK(daemon::ChannelBatch::Current() == &outer);  // the outermost holds it all
      daemon::ChannelBatch::Current()->Defer([&] { flushed.push_back(1); });
    }
    CHECK(flushed.empty());
    // What a flush sends is not held by the batch that flushes.
    outer.Defer([&] { flushed.push_back(daemon::ChannelBatch::Current() == nullptr ? 2 : -2); });
  }
  CHECK(flushed == std::vector<int>{1, 2});
  CHECK(daemon::ChannelBatch::Current() == nullptr);
}

TEST_CASE("a closed host outbox queues and writes nothing more", "[host_stream]") {
  HostOutbox outbox;
  REQUIRE(outbox.Add(1, Generation(1)) != nullptr);
  CHECK(outbox.Add(2, Generation(1)) == nullptr);
  outbox.Close();
  CHECK(outbox.closed());
  CHECK(outbox.queued() == 0);
  CHECK(outbox.Add(3, Generation(1)) == nullptr);
  CHECK(outbox.WriteDone() == nullptr);
  CHECK(outbox.Echo() == nullptr);
}

// One AttachHost stream played by the test: writes from the test's thread,
// every HostDaemonMessage read kept by a reader thread.
class HostClient {
 public:
  explicit HostClient(const std::string& address)
      : stub_(v1::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->AttachHost(&context_);
    reader_ = std::thread([this] {
      v1::HostDaemonMessage message;
      while (stream_->Read(&message)) {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(message);
      }
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = true;
    });
  }
  ~HostClient() {
    context_.TryCancel();
    reader_.join();
  }

  bool Write(const v1::HostMessage& message) { return stream_->Write(message); }
  // Closes the host's side; the daemon's end of the stream follows.
  grpc::Status Close() {
    stream_->WritesDone();
    reader_.join();
    grpc::Status status = stream_->Finish();
    reader_ = std::thread([] {});
    return status;
  }
  // Ends the stream as a dying host would: no goodbye.
  void Cancel() { context_.TryCancel(); }

  std::vector<v1::HostDaemonMessage> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  // Every message relayed to worker `worker_id` so far, in order.
  std::vector<v1::DaemonMessage> For(int64_t worker_id) {
    std::vector<v1::DaemonMessage> out;
    for (const auto& batch : received()) {
      for (const auto& relayed : batch.workers()) {
        if (relayed.worker_id() == worker_id) out.push_back(relayed.message());
      }
    }
    return out;
  }
  // The rendezvous answer relayed to `worker_id`, if one came.
  std::optional<v1::StreamRendezvousAnswer> AnswerFor(int64_t worker_id) {
    for (const auto& message : For(worker_id)) {
      if (message.has_rendezvous()) return message.rendezvous();
    }
    return std::nullopt;
  }

 private:
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::HostMessage, v1::HostDaemonMessage>> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::vector<v1::HostDaemonMessage> received_;
  bool ended_ = false;
};

void AddHello(v1::HostMessage& message, const v1::WorkerIdentity& who) {
  v1::RelayedWorkerMessage* relayed = message.add_workers();
  relayed->set_worker_id(who.worker_id());
  *relayed->mutable_message()->mutable_hello() = who;
}
void AddAsk(v1::HostMessage& message, int64_t worker_id, int64_t after_generation) {
  v1::RelayedWorkerMessage* relayed = message.add_workers();
  relayed->set_worker_id(worker_id);
  relayed->mutable_message()->mutable_rendezvous()->set_id(after_generation + 1);
  relayed->mutable_message()->mutable_rendezvous()->set_after_generation(after_generation);
}
void AddHeartbeat(v1::HostMessage& message, int64_t worker_id, int64_t generation) {
  v1::RelayedWorkerMessage* relayed = message.add_workers();
  relayed->set_worker_id(worker_id);
  relayed->mutable_message()->mutable_heartbeat()->set_generation(generation);
}

TEST_CASE("a host stream relays its workers' rendezvous, heartbeats and next generation",
          "[host_stream]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/3, /*liveness_timeout_s=*/60,
                         /*num_proc=*/3);
  auto who = daemon.Identities();
  REQUIRE(who.size() == 3);
  HostClient host(daemon.address());
  // All three workers' hellos and rendezvous requests in one message.
  v1::HostMessage up;
  for (const auto& [handle, identity] : who) AddHello(up, identity);
  for (const auto& [handle, identity] : who) AddAsk(up, identity.worker_id(), 0);
  REQUIRE(host.Write(up));
  REQUIRE(WaitUntil([&] {
    for (const auto& [handle, identity] : who) {
      if (!host.AnswerFor(identity.worker_id())) return false;
    }
    return true;
  }));
  std::set<int> ranks;
  int64_t generation = 0;
  for (const auto& [handle, identity] : who) {
    const v1::StreamRendezvousAnswer answer = *host.AnswerFor(identity.worker_id());
    CHECK(answer.code() == 0);
    CHECK(answer.response().size() == 3);
    ranks.insert(answer.response().rank());
    generation = answer.response().generation();
    // As on an Attach stream, each message names the job's heartbeat interval.
    CHECK(host.For(identity.worker_id()).back().heartbeat_interval_ms() > 0);
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  for (const auto& batch : host.received()) CHECK(batch.heartbeat_interval_ms() > 0);
  // The generation's answers to the host's workers went in one write.
  for (const auto& batch : host.received()) {
    int answers = 0;
    for (const auto& relayed : batch.workers()) answers += relayed.message().has_rendezvous();
    CHECK((answers == 0 || answers == 3));
  }

  // A heartbeat round of all three in one message is answered.
  const size_t before = host.received().size();
  v1::HostMessage beats;
  for (const auto& [handle, identity] : who) AddHeartbeat(beats, identity.worker_id(), generation);
  REQUIRE(host.Write(beats));
  REQUIRE(WaitUntil([&] { return host.received().size() > before; }));

  // Worker 2 dies (the launcher reports it, its part of the stream ends):
  // the other two hear of the next generation through the host stream.
  const v1::WorkerIdentity& victim = who.at(2);
  daemon.Kill(2);
  v1::HostMessage gone;
  gone.add_detached(victim.worker_id());
  REQUIRE(host.Write(gone));
  for (int64_t handle : {1, 3}) {
    const int64_t id = who.at(handle).worker_id();
    CHECK(WaitUntil([&] {
      for (const auto& message : host.For(id)) {
        if (message.generation() > generation) return true;
      }
      return false;
    }));
  }
  // Both survivors heard of it in one write.
  for (const auto& batch : host.received()) {
    int news = 0;
    for (const auto& relayed : batch.workers()) {
      news += !relayed.message().has_rendezvous() && relayed.message().generation() > generation;
    }
    CHECK((news == 0 || news == 2));
  }
  // The survivors rendezvous again on the same stream.
  v1::HostMessage again;
  for (int64_t handle : {1, 3}) AddAsk(again, who.at(handle).worker_id(), generation);
  REQUIRE(host.Write(again));
  for (int64_t handle : {1, 3}) {
    const int64_t id = who.at(handle).worker_id();
    REQUIRE(WaitUntil([&] {
      for (const auto& message : host.For(id)) {
        if (message.has_rendezvous() && message.rendezvous().response().generation() > generation)
          return true;
      }
      return false;
    }));
  }
  CHECK(host.Close().ok());
}

TEST_CASE("a host stream and a worker's own Attach stream serve one job side by side",
          "[host_stream]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/3, /*liveness_timeout_s=*/60,
                         /*num_proc=*/3);
  auto who = daemon.Identities();
  REQUIRE(who.size() == 3);
  // Workers 1 and 2 through their host's stream; worker 3 on its own, as
  // the runtime attaches.
  HostClient host(daemon.address());
  v1::HostMessage up;
  for (int64_t handle : {1, 2}) {
    AddHello(up, who.at(handle));
    AddAsk(up, who.at(handle).worker_id(), 0);
  }
  REQUIRE(host.Write(up));
  internal::DaemonClientOptions options = daemon.ClientOptions();
  options.worker_id = who.at(3).worker_id();
  auto client = internal::DaemonClient::Create(options);
  REQUIRE(client.ok());
  (*client)->StartAttach();
  absl::StatusOr<v1::RendezvousResponse> direct = (*client)->Rendezvous(0);
  REQUIRE(direct.status().ToString() == "OK");
  CHECK(direct->size() == 3);
  REQUIRE(WaitUntil([&] {
    return host.AnswerFor(who.at(1).worker_id()) && host.AnswerFor(who.at(2).worker_id());
  }));
  std::set<int> ranks = {direct->rank()};
  for (int64_t handle : {1, 2}) {
    const auto answer = *host.AnswerFor(who.at(handle).worker_id());
    CHECK(answer.code() == 0);
    CHECK(answer.response().generation() == direct->generation());
    ranks.insert(answer.response().rank());
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  (*client)->Stop();
  CHECK(host.Close().ok());
}

TEST_CASE("a host stream holds each relayed worker to its own stream's rules", "[host_stream]") {
  RecordingDaemon daemon(/*announce=*/true, /*max_np=*/2, /*liveness_timeout_s=*/60,
                         /*num_proc=*/2);
  auto who = daemon.Identities();
  struct Case {
    const char* what;
    std::function<void(v1::HostMessage&)> build;
    grpc::StatusCode code;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"a rendezvous before the worker's hello",
       [&](v1::HostMessage& m) { AddAsk(m, who.at(1).worker_id(), 0); },
       grpc::StatusCode::FAILED_PRECONDITION, "must follow its hello"},
      {"a hello with a token that is not the job's",
       [&](v1::HostMessage& m) {
         v1::WorkerIdentity bad = who.at(1);
         bad.set_token("not-the-token");
         AddHello(m, bad);
       },
       grpc::StatusCode::UNAUTHENTICATED, ""},
      {"a hello relayed under another worker's id",
       [&](v1::HostMessage& m) {
         AddHello(m, who.at(1));
         m.mutable_workers(0)->set_worker_id(who.at(2).worker_id());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "names worker"},
      {"a hello for a job the daemon does not have",
       [&](v1::HostMessage& m) {
         v1::WorkerIdentity stranger = who.at(1);
         stranger.set_job_id("no-such-job");
         AddHello(m, stranger);
       },
       grpc::StatusCode::NOT_FOUND, "no job 'no-such-job'"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    HostClient host(daemon.address());
    v1::HostMessage message;
    c.build(message);
    host.Write(message);
    grpc::Status status = host.Close();
    CHECK(status.error_code() == c.code);
    CHECK_THAT(status.error_message(), Catch::Contains(c.reason));
  }
}

}  // namespace
}  // namespace horovodd
