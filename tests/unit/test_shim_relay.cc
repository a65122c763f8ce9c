// The relay a host's shim runs for its workers (daemon/shim_relay/host_relay.h),
// between workers' Attach streams and a stand-in daemon played by the test
// (FakeDaemon: it records each AttachHost stream's HostMessages and writes
// what the test tells it to): several workers on one host stream, what goes
// down to each, a worker's end, the host stream's end and the next one
// through a daemon restart, unary calls, and the runtime's DaemonClient
// through a relay whose daemon is gone.
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "daemon/shim_relay/host_relay.h"
#include "horovodd.grpc.pb.h"
#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_client.h"

namespace horovodd {
namespace {

using shim::HostRelay;
using shim::HostRelayOptions;
using testing::WaitUntil;

// One AttachHost stream as the stand-in daemon serves it.
class FakeHostStream final
    : public grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
 public:
  FakeHostStream() { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The relay's side ended (or the daemon stops): a callback stream must
      // still be finished for its OnDone to come.
      End(grpc::Status::OK);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(in_);
    }
    StartRead(&in_);
  }
  // gRPC may run a reaction on the thread that starts an operation: none
  // is started under mu_.
  void OnWriteDone(bool) override {
    const v1::HostDaemonMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outbox_.pop_front();
      if (!outbox_.empty()) {
        next = &outbox_.front();
      } else {
        finish.swap(finish_);
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }
  void OnDone() override {
    // The daemon keeps it for the test to read; freed with the daemon.
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }

  void Send(v1::HostDaemonMessage message) {
    const v1::HostDaemonMessage* first = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ending_) return;
      outbox_.push_back(std::move(message));
      if (outbox_.size() == 1) first = &outbox_.front();
    }
    if (first != nullptr) StartWrite(first);
  }
  void End(grpc::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ending_) return;
      ending_ = true;
      if (!outbox_.empty()) {
        finish_ = status;
        return;
      }
    }
    Finish(status);
  }
  std::vector<v1::HostMessage> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Every message relayed from worker `id`, in order.
  std::vector<v1::WorkerMessage> From(int64_t id) {
    std::vector<v1::WorkerMessage> out;
    for (const auto& batch : received()) {
      for (const auto& relayed : batch.workers()) {
        if (relayed.worker_id() == id) out.push_back(relayed.message());
      }
    }
    return out;
  }
  std::vector<int64_t> detached() {
    std::vector<int64_t> out;
    for (const auto& batch : received()) {
      out.insert(out.end(), batch.detached().begin(), batch.detached().end());
    }
    return out;
  }

 private:
  v1::HostMessage in_;
  std::mutex mu_;
  std::vector<v1::HostMessage> received_;
  std::deque<v1::HostDaemonMessage> outbox_;
  std::optional<grpc::Status> finish_;
  bool ending_ = false;
  bool done_ = false;
};

// A daemon's WorkerService as far as the relay uses it, on `address`
// (port 0: any); the unary calls answer from what the test set.
class FakeDaemon final : public v1::WorkerService::CallbackService {
 public:
  explicit FakeDaemon(const std::string& address = "127.0.0.1:0") {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    REQUIRE(server_);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~FakeDaemon() { Stop(); }

  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }

  grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* AttachHost(
      grpc::CallbackServerContext*) override {
    auto stream = std::make_unique<FakeHostStream>();
    FakeHostStream* raw = stream.get();
    std::lock_guard<std::mutex> lock(mu_);
    streams_.push_back(std::move(stream));
    return raw;
  }
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override {
    auto* reactor = context->DefaultReactor();
    if (request->who().token() != "secret") {
      reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong token"));
    } else {
      for (const auto& key : request->keys()) response->add_values("value of " + key);
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }
  grpc::ServerUnaryReactor* ReportCommit(grpc::CallbackServerContext* context,
                                         const v1::CommitReport* request, v1::Empty*) override {
    commits_ += request->commit();
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  const std::string& address() const { return address_; }
  int streams() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(streams_.size());
  }
  FakeHostStream* stream(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_.at(static_cast<size_t>(i)).get();
  }
  int64_t commits() const { return commits_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::mutex mu_;
  // Kept until the daemon goes (each is done by then: Stop ends them).
  std::vector<std::unique_ptr<FakeHostStream>> streams_;
  std::atomic<int64_t> commits_{0};
};

// One worker's Attach stream to the relay, played by the test.
class Worker {
 public:
  Worker(const std::string& address, int64_t id)
      : id_(id),
        stub_(v1::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Attach(&context_);
    reader_ = std::thread([this] {
      v1::DaemonMessage message;
      while (stream_->Read(&message)) {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(message);
      }
      grpc::Status status = stream_->Finish();
      std::lock_guard<std::mutex> lock(mu_);
      status_ = status;
    });
  }
  ~Worker() {
    context_.TryCancel();
    reader_.join();
  }

  bool Hello() {
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_job_id("job");
    hello.mutable_hello()->set_worker_id(id_);
    hello.mutable_hello()->set_token("secret");
    return stream_->Write(hello);
  }
  bool Heartbeat(int64_t generation) {
    v1::WorkerMessage message;
    message.mutable_heartbeat()->set_generation(generation);
    return stream_->Write(message);
  }
  bool Rendezvous(int64_t ask, int64_t after) {
    v1::WorkerMessage message;
    message.mutable_rendezvous()->set_id(ask);
    message.mutable_rendezvous()->set_after_generation(after);
    return stream_->Write(message);
  }
  void Cancel() { context_.TryCancel(); }

  std::vector<v1::DaemonMessage> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  std::optional<grpc::Status> status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  const int64_t id_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::vector<v1::DaemonMessage> received_;
  std::optional<grpc::Status> status_;
};

std::unique_ptr<HostRelay> StartRelay(const std::string& daemon_address) {
  HostRelayOptions options;
  options.daemon_address = daemon_address;
  auto relay = HostRelay::Start(options);
  REQUIRE(relay.ok());
  return std::move(*relay);
}

v1::RelayedDaemonMessage To(int64_t id, int64_t generation) {
  v1::RelayedDaemonMessage relayed;
  relayed.set_worker_id(id);
  relayed.mutable_message()->set_generation(generation);
  return relayed;
}

TEST_CASE("a relay carries several workers' streams on one host stream each its own way",
          "[shim_relay]") {
  FakeDaemon daemon;
  auto relay = StartRelay(daemon.address());
  REQUIRE(WaitUntil([&] { return daemon.streams() == 1; }));
  FakeHostStream* host = daemon.stream(0);

  Worker w1(relay->address(), 1), w2(relay->address(), 2), w3(relay->address(), 3);
  for (Worker* w : {&w1, &w2, &w3}) REQUIRE(w->Hello());
  REQUIRE(WaitUntil(
      [&] { return !host->From(1).empty() && !host->From(2).empty() && !host->From(3).empty(); }));
  for (int64_t id : {1, 2, 3}) {
    const v1::WorkerMessage hello = host->From(id).front();
    REQUIRE(hello.has_hello());
    CHECK(hello.hello().worker_id() == id);
    CHECK(hello.hello().token() == "secret");  // the daemon checks it, per worker
  }
  CHECK(relay->relayed_workers() == 3);

  // Up: each worker's heartbeats and rendezvous under its own id.
  REQUIRE(w1.Heartbeat(4));
  REQUIRE(w3.Heartbeat(4));
  REQUIRE(w2.Rendezvous(7, 4));
  REQUIRE(WaitUntil([&] { return host->From(1).size() == 2 && host->From(3).size() == 2; }));
  REQUIRE(WaitUntil([&] { return host->From(2).size() == 2; }));
  CHECK(host->From(1).back().heartbeat().generation() == 4);
  CHECK(host->From(2).back().rendezvous().id() == 7);
  CHECK(host->From(2).back().rendezvous().after_generation() == 4);

  // Down: a batch for workers 2 and 3; worker 1 heartbeated and is not in
  // it, so it hears the batch as the daemon's echo.
  v1::HostDaemonMessage batch;
  *batch.add_workers() = To(2, 5);
  *batch.add_workers() = To(3, 5);
  batch.mutable_workers(0)->mutable_message()->mutable_rendezvous()->set_id(7);
  batch.set_heartbeat_interval_ms(750);
  host->Send(batch);
  REQUIRE(WaitUntil([&] { return w1.received().size() == 1 && w2.received().size() == 1; }));
  REQUIRE(WaitUntil([&] { return w3.received().size() == 1; }));
  CHECK(w1.received()[0].generation() == 0);  // an echo announces nothing
  CHECK(w1.received()[0].heartbeat_interval_ms() == 750);
  CHECK(w2.received()[0].rendezvous().id() == 7);
  CHECK(w2.received()[0].heartbeat_interval_ms() == 750);
  CHECK(w3.received()[0].generation() == 5);

  // An empty batch (the daemon's answer to a heartbeat round) reaches only
  // the workers that heartbeated since they last heard from it.
  REQUIRE(w1.Heartbeat(5));
  REQUIRE(WaitUntil([&] { return host->From(1).size() == 3; }));
  host->Send(v1::HostDaemonMessage());
  REQUIRE(WaitUntil([&] { return w1.received().size() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(w2.received().size() == 1);
  CHECK(w3.received().size() == 1);

  // A worker's end reaches the daemon as that worker's detach.
  w2.Cancel();
  REQUIRE(WaitUntil([&] { return host->detached() == std::vector<int64_t>{2}; }));
  CHECK(relay->relayed_workers() == 2);
  CHECK(daemon.streams() == 1);
  CHECK(relay->host_streams_opened() == 1);
}

TEST_CASE("a rendezvous before the hello is refused as the daemon refuses it", "[shim_relay]") {
  FakeDaemon daemon;
  auto relay = StartRelay(daemon.address());
  Worker w(relay->address(), 1);
  REQUIRE(w.Rendezvous(1, 0));
  REQUIRE(WaitUntil([&] { return w.status().has_value(); }));
  CHECK(w.status()->error_code() == grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("the end of the host stream ends its workers' streams with its status", "[shim_relay]") {
  FakeDaemon daemon;
  auto relay = StartRelay(daemon.address());
  REQUIRE(WaitUntil([&] { return daemon.streams() == 1; }));
  Worker w1(relay->address(), 1), w2(relay->address(), 2);
  REQUIRE(w1.Hello());
  REQUIRE(w2.Hello());
  REQUIRE(WaitUntil([&] { return relay->relayed_workers() == 2; }));
  REQUIRE(WaitUntil([&] { return daemon.stream(0)->From(2).size() == 1; }));

  // A refusal (the daemon's answer to a wrong token) reaches each worker as
  // it would on its own stream.
  daemon.stream(0)->End(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong token"));
  REQUIRE(WaitUntil([&] { return w1.status().has_value() && w2.status().has_value(); }));
  CHECK(w1.status()->error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(w2.status()->error_message() == "wrong token");

  // The next host stream opens by itself and carries the workers that come back.
  REQUIRE(WaitUntil([&] { return daemon.streams() == 2; }));
  Worker again(relay->address(), 1);
  REQUIRE(again.Hello());
  REQUIRE(WaitUntil([&] { return daemon.stream(1)->From(1).size() == 1; }));
  CHECK(relay->host_streams_opened() == 2);
  // The old stream's workers are not the new one's.
  CHECK(daemon.stream(1)->From(2).empty());
}

TEST_CASE("through a daemon restart a worker's hello and rendezvous wait for the next daemon",
          "[shim_relay]") {
  auto daemon = std::make_unique<FakeDaemon>();
  const std::string address = daemon->address();
  auto relay = StartRelay(address);
  REQUIRE(WaitUntil([&] { return daemon->streams() == 1; }));
  auto w1 = std::make_unique<Worker>(relay->address(), 1);
  REQUIRE(w1->Hello());
  REQUIRE(WaitUntil([&] { return relay->relayed_workers() == 1; }));

  daemon->Stop();  // as a SIGKILL: the host stream breaks
  REQUIRE(WaitUntil([&] { return w1->status().has_value(); }));
  CHECK(w1->status()->error_code() == grpc::StatusCode::UNAVAILABLE);
  // The worker reconnects (to its relay) and asks again while no daemon is there.
  auto back = std::make_unique<Worker>(relay->address(), 1);
  REQUIRE(back->Hello());
  REQUIRE(back->Rendezvous(2, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(relay->relayed_workers() <= 1);
  CHECK_FALSE(back->status().has_value());  // held, not refused

  daemon = std::make_unique<FakeDaemon>(address);
  REQUIRE(WaitUntil([&] { return daemon->streams() >= 1; }));
  FakeHostStream* host = daemon->stream(daemon->streams() - 1);
  REQUIRE(WaitUntil([&] { return host->From(1).size() == 2; }));
  CHECK(host->From(1)[0].has_hello());
  CHECK(host->From(1)[1].rendezvous().id() == 2);
  CHECK(host->From(1)[1].rendezvous().after_generation() == 3);
  CHECK(daemon->streams() == 1);  // one host stream for the host, after the restart too

  v1::HostDaemonMessage answer;
  *answer.add_workers() = To(1, 0);
  answer.mutable_workers(0)->mutable_message()->mutable_rendezvous()->set_id(2);
  host->Send(answer);
  REQUIRE(WaitUntil([&] { return back->received().size() == 1; }));
  CHECK(back->received()[0].rendezvous().id() == 2);
}

TEST_CASE("a relay forwards unary calls with the daemon's answer and errors", "[shim_relay]") {
  FakeDaemon daemon;
  auto relay = StartRelay(daemon.address());
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(relay->address(), grpc::InsecureChannelCredentials()));

  v1::KvGetRequest get;
  get.mutable_who()->set_token("secret");
  get.add_keys("a");
  get.add_keys("b");
  v1::KvGetResponse values;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  REQUIRE(stub->KvGet(&context, get, &values).ok());
  REQUIRE(values.values_size() == 2);
  CHECK(values.values(1) == "value of b");

  get.mutable_who()->set_token("wrong");
  grpc::ClientContext refused;
  grpc::Status status = stub->KvGet(&refused, get, &values);
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message() == "wrong token");

  v1::CommitReport commit;
  commit.set_commit(5);
  v1::Empty empty;
  grpc::ClientContext report;
  REQUIRE(stub->ReportCommit(&report, commit, &empty).ok());
  CHECK(daemon.commits() == 5);

  // A method the daemon does not serve here: its UNIMPLEMENTED comes back.
  v1::KvSetRequest set;
  v1::KvSetResponse set_response;
  grpc::ClientContext unserved;
  CHECK(stub->KvSet(&unserved, set, &set_response).error_code() == grpc::StatusCode::UNIMPLEMENTED);

  // With no daemon, as for a worker dialling a dead daemon.
  daemon.Stop();
  grpc::ClientContext away;
  away.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  get.mutable_who()->set_token("secret");
  CHECK(stub->KvGet(&away, get, &values).error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("a relayed runtime counts only the daemon's answers as contact", "[shim_relay]") {
  // The daemon is gone, its relay is not: the worker's grace period runs
  // out as it would against a dead daemon.
  auto daemon = std::make_unique<FakeDaemon>();
  auto relay = StartRelay(daemon->address());
  daemon->Stop();

  internal::DaemonClientOptions options;
  options.address = relay->address();
  options.job_id = "job";
  options.worker_id = 1;
  options.relayed = true;
  options.heartbeat_interval = absl::Milliseconds(50);
  options.daemon_grace = absl::Milliseconds(600);
  std::atomic<bool> lost{false};
  options.on_daemon_lost = [&] { lost = true; };
  auto client = internal::DaemonClient::Create(options);
  REQUIRE(client.ok());
  (*client)->StartAttach();
  CHECK(WaitUntil([&] { return lost.load(); }, std::chrono::seconds(20)));
  (*client)->Stop();
}

}  // namespace
}  // namespace horovodd
