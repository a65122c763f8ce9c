// The worker runtime without a real daemon: elastic state, the daemon-backed
// Gloo store, and workers run as threads against FakeDaemon, a small
// in-test WorkerService on a loopback port (fixed job size, generations the
// test advances by hand).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/common/error.h>
#include <grpcpp/grpcpp.h>

#include "wait_until.h"
#include "horovodd.grpc.pb.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/daemon_client.h"
#include "worker_runtime/daemon_store.h"
#include "worker_runtime/gloo_context.h"
#include "worker_runtime/runtime.h"

namespace horovodd {
namespace {

using internal::Runtime;
using testing::WaitUntil;
namespace v1 = horovodd::v1;

// Generous "did not hang" bound for every wait in this file.
constexpr auto kPatience = std::chrono::seconds(60);

class FakeDaemon final : public v1::WorkerService::Service {
 public:
  explicit FakeDaemon(int size) : size_(size) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeDaemon() override { Stop(); }

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

  grpc::Status Rendezvous(grpc::ServerContext*, const v1::RendezvousRequest* request,
                          v1::RendezvousResponse* response) override {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t worker = request->who().worker_id();
    // Bounded, so a runtime that never gets a new generation fails the test.
    if (!cv_.wait_for(lock, kPatience, [&] {
          return stopping_ || generation_ > request->after_generation();
        })) {
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

  grpc::Status Attach(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream)
      override {
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
  int64_t heartbeats_ = 0;
  std::map<int64_t, int64_t> commits_;
  int failures_ = 0;
};

// Runs body(worker_id, runtime) on `n` threads, each with its own Runtime that
// joined the fake daemon's first generation and is bound to its thread.
// Returns each worker's status (the join's error, or body's result).
std::vector<absl::Status> RunWorkers(
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

void RequireAllOk(const std::vector<absl::Status>& results) {
  for (const auto& status : results) REQUIRE(status.ToString() == "OK");
}

}  // namespace

// ---------------------------------------------------------------------------

TEST_CASE("BufferState restores the values saved at the last commit") {
  std::vector<float> weights = {1, 2, 3};
  std::vector<double> moments = {0.5};
  int64_t epoch = 4;
  elastic::BufferState state;
  state.AddBuffer("weights", &weights);
  state.AddBuffer("moments", &moments);
  state.AddValue("epoch", &epoch);
  state.Save();
  weights = {9, 9, 9, 9};
  moments[0] = -1;
  epoch = 7;
  state.Restore();
  CHECK(weights == std::vector<float>{1, 2, 3});
  CHECK(moments == std::vector<double>{0.5});
  CHECK(epoch == 4);
}

TEST_CASE("IsHostsUpdated tells a host update from other ABORTED statuses") {
  absl::Status update = elastic::HostsUpdatedError(3, 5);
  CHECK(update.code() == absl::StatusCode::kAborted);
  CHECK(update.message().find("generation 5") != std::string::npos);
  CHECK(elastic::IsHostsUpdated(update));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::AbortedError("hosts updated")));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::UnavailableError("peer lost")));
  CHECK_FALSE(elastic::IsHostsUpdated(absl::OkStatus()));
}

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

TEST_CASE("DaemonStore sets, waits for and gets keys through the daemon") {
  FakeDaemon daemon(1);
  auto client = internal::DaemonClient::Create(daemon.ClientOptions(0));
  REQUIRE(client.ok());
  internal::DaemonStore writer(**client, 1, absl::Seconds(60));
  internal::DaemonStore reader(**client, 1, absl::Seconds(60));

  std::thread late_writer([&] { writer.set("late", {'o', 'k'}); });
  reader.wait({"late"});
  late_writer.join();
  CHECK(reader.get("late") == std::vector<char>{'o', 'k'});

  writer.set("addr", {'\0', 'x'});
  CHECK(reader.get("addr") == std::vector<char>{'\0', 'x'});

  SECTION("a key that never comes times out with an I/O error naming it") {
    internal::DaemonStore impatient(**client, 1, absl::Milliseconds(200));
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
  FakeDaemon daemon(1);
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

TEST_CASE("Workers sync a BufferState from one root") {
  FakeDaemon daemon(3);
  std::vector<std::vector<float>> seen(3);
  std::vector<int64_t> seen_steps(3);
  auto results = RunWorkers(daemon, 3, [&](int w, Runtime&) -> absl::Status {
    std::vector<float> weights(4, static_cast<float>(Rank()));
    int64_t step = 100 + Rank();
    elastic::BufferState state;
    state.AddBuffer("weights", &weights);
    state.AddValue("step", &step);
    absl::Status status = state.Sync(/*root=*/1);
    seen[w] = weights;
    seen_steps[w] = step;
    return status;
  });
  RequireAllOk(results);
  for (int w = 0; w < 3; ++w) {
    CHECK(seen[w] == std::vector<float>(4, 1.0f));
    CHECK(seen_steps[w] == 101);
  }
}

// Run's sync after a reset, reachable from a test.
class ExposedBufferState : public elastic::BufferState {
 public:
  using elastic::BufferState::SyncFromNewest;
};

// A state that only has State's own SyncFromNewest (a collective to choose
// the root, then Sync), over one value.
class OneValueState : public elastic::State {
 public:
  explicit OneValueState(int64_t* value) : value_(value) {}
  using elastic::State::SyncFromNewest;
  void Save() override {}
  void Restore() override {}
  absl::Status Sync(int root) override {
    std::vector<int64_t> v = {*value_};
    if (absl::Status s = Broadcast(ViewOf(v), root); !s.ok()) return s;
    *value_ = v[0];
    return absl::OkStatus();
  }

 private:
  int64_t* value_;
};

TEST_CASE("After a reset the state comes from the lowest rank with the most commits") {
  const bool folded = GENERATE(true, false);  // BufferState's own choice, or State's
  FakeDaemon daemon(4);
  const std::vector<int64_t> commits = {2, 5, 5, 0};
  std::vector<int64_t> seen_values(4), seen_newest(4);
  auto results = RunWorkers(daemon, 4, [&](int w, Runtime&) -> absl::Status {
    int64_t value = 1000 + Rank();
    absl::StatusOr<int64_t> newest;
    if (folded) {
      ExposedBufferState state;
      state.AddValue("value", &value);
      newest = state.SyncFromNewest(commits[Rank()]);
    } else {
      OneValueState state(&value);
      newest = state.SyncFromNewest(commits[Rank()]);
    }
    if (!newest.ok()) return newest.status();
    seen_values[w] = value;
    seen_newest[w] = *newest;
    return absl::OkStatus();
  });
  RequireAllOk(results);
  for (int w = 0; w < 4; ++w) {
    CHECK(seen_values[w] == 1001);  // rank 1: 5 commits, the lower of the two
    CHECK(seen_newest[w] == 5);
  }
}

TEST_CASE("Sync refuses buffers whose lengths differ across ranks, on every rank") {
  FakeDaemon daemon(2);
  auto results = RunWorkers(daemon, 2, [&](int, Runtime&) -> absl::Status {
    std::vector<double> weights(Rank() == 0 ? 3 : 5, 1.0);
    elastic::BufferState state;
    state.AddBuffer("weights", &weights);
    return state.Sync(0);
  });
  for (const auto& status : results) {
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find("'weights'") != std::string::npos);
    CHECK(status.message().find("3 to 5") != std::string::npos);
  }
}

TEST_CASE("CheckHostUpdates interrupts every rank when one heard of a new generation") {
  FakeDaemon daemon(3);
  auto results = RunWorkers(daemon, 3, [&](int w, Runtime& runtime) -> absl::Status {
    elastic::BufferState state;
    if (absl::Status first = state.CheckHostUpdates(); !first.ok()) return first;
    if (w == 0) {
      daemon.WaitAttached(3);
      daemon.Announce(0, 2, /*abort=*/false);
      if (!WaitUntil([&] { return runtime.newest_generation() == 2; })) {
        return absl::DeadlineExceededError("announcement not heard");
      }
    }
    absl::Status second = state.CheckHostUpdates();
    return elastic::IsHostsUpdated(second) ? absl::OkStatus() : second;
  });
  RequireAllOk(results);
}

TEST_CASE("A collective blocked on a silent peer returns ABORTED when the daemon aborts") {
  FakeDaemon daemon(2);
  std::atomic<bool> entering{false}, returned{false};
  auto results = RunWorkers(daemon, 2, [&](int w, Runtime&) -> absl::Status {
    std::vector<float> values = {1};
    if (w == 0) {
      // Worker 1 never joins this allreduce; only the abort can end it early.
      entering = true;
      absl::Status blocked = Allreduce(ViewOf(values));
      returned = true;
      absl::Status next = Allreduce(ViewOf(values));
      if (blocked.code() != absl::StatusCode::kAborted ||
          next.code() != absl::StatusCode::kAborted) {
        return absl::InternalError("expected ABORTED twice, got " + blocked.ToString() +
                                   " then " + next.ToString());
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
  RequireAllOk(results);
}

// How rank 0 disturbs the first pass of TrainSteps.
enum class Disturbance {
  kHostsUpdated,  // the daemon announces a new generation
  kDaemonAbort,   // the daemon aborts the generation
  kLostPeer,      // rank 0's ring breaks; only its failure report tells the daemon
};

absl::Status Disturb(Disturbance disturbance, FakeDaemon& daemon, Runtime& runtime) {
  if (disturbance == Disturbance::kLostPeer) {
    return runtime.RunCollective([](gloo::Context& ring) {
      internal::AbortGlooContext(ring);
      return absl::OkStatus();
    });
  }
  daemon.WaitAttached(2);
  daemon.NewGeneration(disturbance == Disturbance::kDaemonAbort);
  return WaitUntil([&] { return runtime.newest_generation() == 2; })
             ? absl::OkStatus()
             : absl::DeadlineExceededError("generation 2 not heard");
}

struct TrainOutcome {
  absl::Status status;
  int resets = 0;
  int callbacks = 0;
  int64_t total = 0;
  int64_t generation = 0;
};

// total += the sum over ranks of 1.
absl::Status AddOnePerRank(std::vector<double>& total) {
  std::vector<double> one = {1};
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  if (absl::Status status = Allreduce(ViewOf(one), sum); !status.ok()) return status;
  total[0] += one[0];
  return absl::OkStatus();
}

// Trains `steps` steps inside elastic::Run; each step adds one per rank to
// the total twice, then commits. Rank 0 disturbs the first pass between the
// two halves of step 3, so a failure there must undo the first half.
TrainOutcome TrainSteps(int steps, Disturbance disturbance, FakeDaemon& daemon,
                        Runtime& runtime) {
  TrainOutcome outcome;
  std::vector<double> total = {0};
  int64_t step = 0;
  elastic::BufferState state;
  state.AddBuffer("total", &total);
  state.AddValue("step", &step);
  state.RegisterResetCallback([&] { ++outcome.callbacks; });
  outcome.status = elastic::Run(state, [&](elastic::State& s) -> absl::Status {
    while (step < steps) {
      if (absl::Status st = AddOnePerRank(total); !st.ok()) return st;
      if (step == 3 && s.resets() == 0 && Rank() == 0) {
        if (absl::Status st = Disturb(disturbance, daemon, runtime); !st.ok()) return st;
      }
      if (absl::Status st = AddOnePerRank(total); !st.ok()) return st;
      ++step;  // before Commit, so a restore never repeats a committed step
      if (absl::Status st = s.Commit(); !st.ok()) return st;
    }
    return absl::OkStatus();
  });
  outcome.resets = state.resets();
  outcome.total = static_cast<int64_t>(total[0]);
  outcome.generation = runtime.generation();
  return outcome;
}

TEST_CASE("elastic::Run rebuilds the job and resumes from the right state") {
  const Disturbance disturbance =
      GENERATE(Disturbance::kHostsUpdated, Disturbance::kDaemonAbort, Disturbance::kLostPeer);
  FakeDaemon daemon(2);
  std::vector<TrainOutcome> outcomes(2);
  RequireAllOk(RunWorkers(daemon, 2, [&](int w, Runtime& runtime) {
    outcomes[w] = TrainSteps(6, disturbance, daemon, runtime);
    return outcomes[w].status;
  }));
  for (int w = 0; w < 2; ++w) {
    CHECK(outcomes[w].resets == 1);
    CHECK(outcomes[w].callbacks == 1);
    CHECK(outcomes[w].generation == 2);
    // Every step added 2 + 2 exactly once to the final total.
    CHECK(outcomes[w].total == 24);
    CHECK(WaitUntil([&] { return daemon.last_commit(w) == 6; }));
  }
  if (disturbance == Disturbance::kLostPeer) CHECK(daemon.failures() >= 1);
}

}  // namespace horovodd
