// The reset path's ring bootstrap: Gloo's store over the daemon's keys
// (GlooKvStore over DaemonKvStore) reads every peer's address in one KvGet
// (not one per peer), and Gloo contexts tear down cleanly, also
// when their connect failed. Runs against KvDaemon, an in-test key-value
// WorkerService on a loopback port that counts the calls it serves.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/common/error.h>
#include <gloo/rendezvous/hash_store.h>
#include <grpcpp/grpcpp.h>

#include "horovodd.grpc.pb.h"
#include "worker_runtime/daemon_client/daemon_client.h"
#include "worker_runtime/daemon_client/daemon_kv_store.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/kv_client/gloo_kv_store.h"

namespace horovodd {
namespace {

namespace v1 = horovodd::v1;

class KvDaemon final : public v1::WorkerService::Service {
 public:
  KvDaemon() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~KvDaemon() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now());
  }

  std::unique_ptr<internal::DaemonClient> Client(int64_t worker_id) const {
    internal::DaemonClientOptions options;
    options.address = "127.0.0.1:" + std::to_string(port_);
    options.job_id = "job-1";
    options.worker_id = worker_id;
    options.on_daemon_lost = [] {};
    auto client = internal::DaemonClient::Create(options);
    REQUIRE(client.ok());
    return *std::move(client);
  }

  int gets() const { return gets_.load(); }
  int sets() const { return sets_.load(); }

  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                     v1::KvSetResponse*) override {
    ++sets_;
    std::lock_guard<std::mutex> lock(mu_);
    kv_[request->generation()][request->key()] = request->value();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override {
    ++gets_;
    std::unique_lock<std::mutex> lock(mu_);
    auto& space = kv_[request->generation()];
    auto all_set = [&] {
      for (const auto& key : request->keys()) {
        if (space.count(key) == 0) return false;
      }
      return true;
    };
    cv_.wait_for(lock, std::chrono::duration<double>(request->timeout_seconds()),
                 [&] { return stopping_ || all_set(); });
    if (!all_set()) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "keys not set");
    for (const auto& key : request->keys()) response->add_values(space[key]);
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> gets_{0};
  std::atomic<int> sets_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<int64_t, std::map<std::string, std::string>> kv_;
};

TEST_CASE(
    "The daemon-backed Gloo store answers gets of keys its wait already read without "
    "asking again") {
  KvDaemon daemon;
  auto client = daemon.Client(0);
  internal::DaemonKvStore writer_keys(*client, 1);
  internal::DaemonKvStore reader_keys(*client, 1);
  internal::GlooKvStore writer(writer_keys, absl::Seconds(60));
  internal::GlooKvStore reader(reader_keys, absl::Seconds(60));
  writer.set("a", {'1'});
  writer.set("b", {'\0', '2'});

  reader.wait({"a", "b"});
  CHECK(daemon.gets() == 1);
  CHECK(reader.get("b") == std::vector<char>{'\0', '2'});
  CHECK(reader.get("a") == std::vector<char>{'1'});
  reader.wait({"a"});
  CHECK(daemon.gets() == 1);

  // A key not read before still goes to the daemon, once.
  writer.set("c", {'3'});
  CHECK(reader.get("c") == std::vector<char>{'3'});
  CHECK(reader.get("c") == std::vector<char>{'3'});
  CHECK(daemon.gets() == 2);

  // Only the missing keys of a wait are asked for.
  writer.set("d", {'4'});
  reader.wait({"a", "c", "d"});
  CHECK(daemon.gets() == 3);
  CHECK(reader.get("d") == std::vector<char>{'4'});
  CHECK(daemon.gets() == 3);
}

TEST_CASE("A ring connects through the daemon with one key write and one key read per rank") {
  KvDaemon daemon;
  constexpr int kSize = 4;
  std::vector<std::unique_ptr<internal::DaemonClient>> clients;
  for (int rank = 0; rank < kSize; ++rank) clients.push_back(daemon.Client(rank));
  std::vector<internal::RingResult> results(kSize);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      internal::RingOptions options;
      options.generation = 7;
      options.rank = rank;
      options.size = kSize;
      options.bind_address = "127.0.0.1";
      options.timeout = absl::Seconds(60);
      results[rank] = internal::ConnectRingThroughDaemon(*clients[rank], options);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 0; rank < kSize; ++rank) {
    INFO("rank " << rank);
    REQUIRE(results[rank].ring.ok());
    CHECK((*results[rank].ring)->size == kSize);
  }
  CHECK(daemon.sets() == kSize);
  CHECK(daemon.gets() == kSize);

  // Aborting one and dropping all (with their devices) neither hangs nor
  // touches a freed handler; an aborted context says so.
  internal::AbortGlooContext(**results[0].ring);
  CHECK((*results[0].ring)->health().code() == absl::StatusCode::kAborted);
  for (auto& result : results) result.ring->reset();
}

TEST_CASE("A Gloo context whose connect fails is torn down cleanly") {
  // Rank 0 of 2 waits for a peer that never comes.
  gloo::rendezvous::HashStore store;
  internal::ConnectOptions options;
  options.rank = 0;
  options.size = 2;
  options.timeout = absl::Milliseconds(200);
  auto context = internal::ConnectGlooContext(store, options);
  CHECK(context.status().code() == absl::StatusCode::kDeadlineExceeded);
  // Torn down while the caller still held the device; a second context
  // (a new device) fails and goes the same way.
  gloo::rendezvous::HashStore other;
  auto again = internal::ConnectGlooContext(other, options);
  CHECK(again.status().code() == absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace horovodd
