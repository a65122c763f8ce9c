// FakeDaemon, a small in-test WorkerService on a loopback port (fixed job
// size, generations the test advances by hand), and RunWorkers, which runs
// workers as threads against it: the worker runtime without a real daemon.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "horovodd.grpc.pb.h"
#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_client.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::testing {

using internal::Runtime;
namespace v1 = horovodd::v1;

// Generous "did not hang" bound for every wait of the tests that use it.
constexpr auto kPatience = std::chrono::seconds(60);

class FakeDaemon final : public v1::WorkerService::Service {
 public:
  explicit FakeDaemon(int size) : size_(size) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeDaemon() override {
    Stop();
    // Every answerer has seen stopping_ by now, or is about to.
    for (auto& answerer : answerers_) answerer.join();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now());
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  internal::DaemonClientOptions ClientOptions(int64_t worker_id) const {
    internal::DaemonClientOptions options;
    options.address = address();
    options.job_id = "job-1";
    options.worker_id = worker_id;
    options.heartbeat_interval = absl::Milliseconds(50);
    options.on_daemon_lost = [] {};  // never exit the test process
    return options;
  }

  // Starts the next generation and tells every attached worker.
  void NewGeneration(bool abort) {
    std::unique_lock<std::mutex> lock(mu_);
    AdvanceLocked(abort, lock);
  }

  // Announces a generation to one worker only, changing nothing else.
  void Announce(int64_t worker_id, int64_t generation, bool abort) {
    v1::DaemonMessage message;
    message.set_generation(generation);
    message.set_abort(abort);
    auto links = Links();
    if (links.count(worker_id)) Send(*links[worker_id], message);
  }

  bool WaitFor(const std::function<bool()>& condition) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, condition);
  }
  bool WaitAttached(size_t workers) {
    return WaitFor([&] { return links_.size() == workers; });
  }
  int64_t heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }
  int64_t last_commit(int64_t worker) {
    std::lock_guard<std::mutex> lock(mu_);
    return commits_[worker];
  }
  int failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

  // Ends the next Attach stream that asks for a rendezvous, unanswered, as a
  // daemon that goes away mid-rendezvous would.
  void DropNextRendezvousStream() {
    std::lock_guard<std::mutex> lock(mu_);
    drop_next_rendezvous_stream_ = true;
  }
  int dropped_rendezvous_streams() {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_rendezvous_streams_;
  }

  // The runtime asks on its Attach stream (see Attach); as the daemon, the
  // answer waits until every worker of the generation asked.
  grpc::Status AnswerRendezvous(int64_t worker, int64_t after_generation,
                                v1::RendezvousResponse* response) {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded, so a runtime that never gets a new generation fails the test.
    if (!cv_.wait_for(lock, kPatience,
                      [&] { return stopping_ || generation_ > after_generation; })) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no newer generation");
    }
    while (!stopping_) {
      const int64_t generation = generation_;
      std::vector<int64_t>& arrived = arrivals_[generation];
      auto it = std::find(arrived.begin(), arrived.end(), worker);
      if (it == arrived.end()) it = arrived.insert(arrived.end(), worker);
      const int rank = static_cast<int>(it - arrived.begin());
      cv_.notify_all();
      cv_.wait(lock, [&] {
        return stopping_ || generation_ != generation || arrived.size() >= size_t(size_);
      });
      if (generation_ != generation) continue;
      response->set_generation(generation);
      response->set_rank(rank);
      response->set_size(size_);
      response->set_local_rank(rank);
      response->set_local_size(size_);
      response->set_cross_rank(0);
      response->set_cross_size(1);
      response->set_bind_address("127.0.0.1");
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "fake daemon stopping");
  }

  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                     v1::KvSetResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (request->generation() < generation_) return Superseded(request->generation());
    kv_[request->generation()][request->key()] = request->value();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = request->generation();
    auto all_set = [&] {
      for (const auto& key : request->keys()) {
        if (!kv_[generation].count(key)) return false;
      }
      return true;
    };
    cv_.wait_for(lock, std::chrono::duration<double>(request->timeout_seconds()),
                 [&] { return stopping_ || generation < generation_ || all_set(); });
    if (generation < generation_) return Superseded(generation);
    if (!all_set()) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "keys not set");
    for (const auto& key : request->keys()) response->add_values(kv_[generation][key]);
    return grpc::Status::OK;
  }

  grpc::Status Attach(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream) override {
    v1::WorkerMessage message;
    if (!stream->Read(&message) || !message.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "hello expected first");
    }
    auto link = std::make_shared<Link>();
    link->stream = stream;
    const int64_t worker = message.hello().worker_id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      links_[worker] = link;
    }
    cv_.notify_all();
    while (stream->Read(&message)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (message.has_heartbeat()) ++heartbeats_;
      if (!message.has_rendezvous()) continue;
      if (drop_next_rendezvous_stream_) {
        drop_next_rendezvous_stream_ = false;
        ++dropped_rendezvous_streams_;
        break;
      }
      // The answer waits for the other workers while this loop reads on.
      answerers_.emplace_back([this, link, worker, ask = message.rendezvous()] {
        v1::DaemonMessage answer;
        answer.mutable_rendezvous()->set_id(ask.id());
        grpc::Status status = AnswerRendezvous(worker, ask.after_generation(),
                                               answer.mutable_rendezvous()->mutable_response());
        answer.mutable_rendezvous()->set_code(status.error_code());
        answer.mutable_rendezvous()->set_message(status.error_message());
        Send(*link, answer);
      });
    }
    {
      std::lock_guard<std::mutex> lock(link->mu);
      link->stream = nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (links_[worker] == link) links_.erase(worker);
    return grpc::Status::OK;
  }

  grpc::Status ReportCommit(grpc::ServerContext*, const v1::CommitReport* report,
                            v1::Empty*) override {
    std::lock_guard<std::mutex> lock(mu_);
    commits_[report->who().worker_id()] = report->commit();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  // Like the real daemon: a failure in the current generation replaces it.
  grpc::Status ReportFailure(grpc::ServerContext*, const v1::FailureReport* report,
                             v1::Empty*) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++failures_;
    if (report->generation() == generation_) AdvanceLocked(/*abort=*/true, lock);
    return grpc::Status::OK;
  }

 private:
  struct Link {
    std::mutex mu;  // guards stream: null once the Attach call ended
    grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream = nullptr;
  };
  // Bumps the generation, then (unlocked) tells every attached worker.
  void AdvanceLocked(bool abort, std::unique_lock<std::mutex>& lock) {
    v1::DaemonMessage message;
    message.set_generation(++generation_);
    message.set_abort(abort);
    auto links = links_;
    lock.unlock();
    cv_.notify_all();
    for (auto& [worker, link] : links) Send(*link, message);
  }
  static grpc::Status Superseded(int64_t generation) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        "generation " + std::to_string(generation) + " was superseded");
  }
  std::map<int64_t, std::shared_ptr<Link>> Links() {
    std::lock_guard<std::mutex> lock(mu_);
    return links_;
  }
  static void Send(Link& link, const v1::DaemonMessage& message) {
    std::lock_guard<std::mutex> lock(link.mu);
    if (link.stream != nullptr) link.stream->Write(message);
  }

  const int size_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t generation_ = 1;
  std::map<int64_t, std::vector<int64_t>> arrivals_;
  std::map<int64_t, std::map<std::string, std::string>> kv_;
  std::map<int64_t, std::shared_ptr<Link>> links_;
  std::vector<std::thread> answerers_;  // one per rendezvous asked; joined at the end
  bool drop_next_rendezvous_stream_ = false;
  int dropped_rendezvous_streams_ = 0;
  int64_t heartbeats_ = 0;
  std::map<int64_t, int64_t> commits_;
  int failures_ = 0;
};

// Runs body(worker_id, runtime) on `n` threads, each with its own Runtime that
// joined the fake daemon's first generation and is bound to its thread.
// Returns each worker's status (the join's error, or body's result).
inline std::vector<absl::Status> RunWorkers(
    FakeDaemon& daemon, int n, const std::function<absl::Status(int, Runtime&)>& body) {
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      internal::RuntimeOptions options;
      options.daemon = daemon.ClientOptions(w);
      options.ring_timeout = absl::Seconds(120);
      auto runtime = Runtime::Create(options);
      if (!runtime.ok()) {
        results[w] = runtime.status();
        return;
      }
      auto joined = (*runtime)->Join(0);
      if (!joined.ok()) {
        results[w] = joined.status();
        return;
      }
      internal::ScopedThreadRuntime bind(**runtime);
      results[w] = body(w, **runtime);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

inline void RequireAllOk(const std::vector<absl::Status>& results) {
  for (const auto& status : results) REQUIRE(status.ToString() == "OK");
}

}  // namespace horovodd::testing
