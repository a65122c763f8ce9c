// InProcessDaemon: the daemon as the worker runtime sees it
// (DaemonConnection), in this process's memory, with no gRPC and no threads
// of its own. Generations are advanced by the test; each has its own
// InMemoryKvStore, aborted when the generation is superseded, as the real
// daemon's key namespace is. Simpler than FakeDaemon (fake_daemon.h) where a
// test is about the runtime's choices rather than the wire.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker_runtime/daemon_client/daemon_connection.h"
#include "worker_runtime/kv_client/in_memory_kv_store.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::testing {

class InProcessDaemon {
 public:
  // Generation 1 holds workers 0 .. size - 1, rank = worker id.
  explicit InProcessDaemon(int size) {
    std::vector<int64_t> members;
    for (int w = 0; w < size; ++w) members.push_back(w);
    absl::MutexLock lock(&mu_);
    StartLocked(std::move(members));
  }

  // For RuntimeOptions::connect_daemon: the connection of the worker that
  // DaemonClientOptions::worker_id names.
  internal::DaemonConnector Connector() {
    return [this](internal::DaemonClientOptions options)
               -> absl::StatusOr<std::unique_ptr<internal::DaemonConnection>> {
      return std::unique_ptr<internal::DaemonConnection>(
          new Connection(*this, options.worker_id, std::move(options.on_message)));
    };
  }

  // Supersedes the current generation with one of `members` (in rank
  // order): its key space is aborted, and every connection hears of it.
  void NewGeneration(std::vector<int64_t> members, bool abort = true) {
    absl::MutexLock lock(&mu_);
    generations_.at(generation_)
        ->Abort(absl::StrCat("generation ", generation_, " was superseded"));
    StartLocked(std::move(members));
    for (Connection* connection : connections_) {
      if (connection->on_message_) connection->on_message_(generation_, abort);
    }
  }

  // The failures workers reported, as "generation: message".
  std::vector<std::string> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }
  // The latest commit worker `w` reported (-1: none).
  int64_t last_commit(int64_t w) const {
    absl::MutexLock lock(&mu_);
    auto it = commits_.find(w);
    return it == commits_.end() ? -1 : it->second;
  }
  // Waits (bounded) until `n` failures were reported.
  bool WaitForFailures(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reported = [this, n]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return failures_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reported), absl::Seconds(60));
  }

 private:
  class Connection final : public internal::DaemonConnection {
   public:
    Connection(InProcessDaemon& daemon, int64_t worker,
               std::function<void(int64_t, bool)> on_message)
        : daemon_(daemon), worker_(worker), on_message_(std::move(on_message)) {}
    ~Connection() override { Stop(); }

    void StartAttach() override {
      absl::MutexLock lock(&daemon_.mu_);
      if (!stopped_) daemon_.connections_.push_back(this);
    }
    void Stop() override {
      absl::MutexLock lock(&daemon_.mu_);
      stopped_ = true;
      auto& all = daemon_.connections_;
      all.erase(std::remove(all.begin(), all.end(), this), all.end());
    }

    absl::StatusOr<v1::RendezvousResponse> Rendezvous(int64_t after) override {
      absl::MutexLock lock(&daemon_.mu_);
      auto answered = [this, after]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(daemon_.mu_) {
        return stopped_ || daemon_.generation_ > after;
      };
      daemon_.mu_.Await(absl::Condition(&answered));
      if (stopped_) return absl::CancelledError("the connection was stopped");
      v1::RendezvousResponse response;
      response.set_generation(daemon_.generation_);
      auto it = std::find(daemon_.members_.begin(), daemon_.members_.end(), worker_);
      if (it == daemon_.members_.end()) {
        response.set_removed(true);
        return response;
      }
      const int rank = static_cast<int>(it - daemon_.members_.begin());
      const int size = static_cast<int>(daemon_.members_.size());
      response.set_rank(rank);
      response.set_size(size);
      response.set_local_rank(rank);
      response.set_local_size(size);
      response.set_cross_rank(0);
      response.set_cross_size(1);
      return response;
    }

    absl::Status KvSet(int64_t generation, const std::string& key, std::string value) override {
      return daemon_.Keys(generation).Set(key, std::move(value));
    }
    absl::StatusOr<std::vector<std::string>> KvGet(int64_t generation,
                                                   const std::vector<std::string>& keys,
                                                   absl::Duration timeout) override {
      return daemon_.Keys(generation).Get(keys, timeout);
    }

    void ReportCommit(int64_t, int64_t commit) override {
      absl::MutexLock lock(&daemon_.mu_);
      daemon_.commits_[worker_] = commit;
    }
    void ReportFailure(int64_t generation, std::string message) override {
      absl::MutexLock lock(&daemon_.mu_);
      daemon_.failures_.push_back(absl::StrCat(generation, ": ", message));
    }

    void set_current_generation(int64_t) override {}
    int64_t newest_generation() const override {
      absl::MutexLock lock(&daemon_.mu_);
      return daemon_.generation_;
    }

   private:
    friend class InProcessDaemon;
    InProcessDaemon& daemon_;
    const int64_t worker_;
    const std::function<void(int64_t, bool)> on_message_;
    bool stopped_ ABSL_GUARDED_BY(daemon_.mu_) = false;
  };

  void StartLocked(std::vector<int64_t> members) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++generation_;
    members_ = std::move(members);
    generations_[generation_] = std::make_unique<internal::InMemoryKvStore>();
  }

  // A generation's keys; the store outlives every call (generations are
  // never dropped while the daemon lives).
  internal::InMemoryKvStore& Keys(int64_t generation) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<internal::InMemoryKvStore>& keys = generations_[generation];
    if (keys == nullptr) keys = std::make_unique<internal::InMemoryKvStore>();
    return *keys;
  }

  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> members_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<internal::InMemoryKvStore>> generations_ ABSL_GUARDED_BY(mu_);
  std::vector<Connection*> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, int64_t> commits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::testing
