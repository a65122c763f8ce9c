// The load generator's simulated workers and hosts (bench/scale_load.cc):
// a worker's ring bootstrap on the daemon's key-value store (RingWorker), and
// the two ways it attaches, its own Attach stream (SimWorker) or its host's
// AttachHost stream shared by the host's workers (SimHost). All on gRPC's
// callback API; the counters they bump are the load generator's (Shared).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::bench {
using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  int rendezvous_done = 0;       // guarded by mu
  int bootstrap_done = 0;        // guarded by mu
  int errors = 0;                // guarded by mu
  std::string first_error;       // guarded by mu
  double last_ready_s = 0;       // guarded by mu
  double last_bootstrap_s = 0;   // guarded by mu
  int loss_heard = 0;            // guarded by mu
  double last_loss_heard_s = 0;  // guarded by mu
  Clock::time_point start;

  void Error(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (errors++ == 0) first_error = what;
    cv.notify_all();
  }
};

inline std::string AddressValue(int rank) { return absl::StrCat("10.0.0.1:", 20000 + rank); }

// One simulated worker's side of what the daemon tells it, whichever stream
// brings it (its own Attach stream or its host's): the rendezvous answer
// starts its ring bootstrap (sets its own address key, reads its two
// neighbours'), a later generation is its news of a loss, and the daemon's
// heartbeat interval is noted. Called by one stream's reads at a time.
class RingWorker {
 public:
  RingWorker(v1::WorkerService::Stub* stub, Shared* shared, v1::WorkerIdentity who)
      : stub_(stub), shared_(shared), who_(std::move(who)) {}

  const v1::WorkerIdentity& who() const { return who_; }
  int notifications() const { return notifications_.load(); }

  // A message of the daemon's for this worker.
  void OnMessage(const v1::DaemonMessage& message) {
    if (message.has_rendezvous()) {
      OnRendezvous(message.rendezvous());
      return;
    }
    notifications_.fetch_add(1);
    if (rank_ >= 0 && message.generation() > rendezvous_response_.generation() &&
        !heard_next_generation_) {
      heard_next_generation_ = true;
      std::lock_guard<std::mutex> lock(shared_->mu);
      ++shared_->loss_heard;
      shared_->last_loss_heard_s = SecondsSince(shared_->start);
      shared_->cv.notify_all();
    }
  }

 private:
  void OnRendezvous(const v1::StreamRendezvousAnswer& answer) {
    if (answer.code() != 0) {
      shared_->Error(
          absl::StrCat("rendezvous of worker ", who_.worker_id(), ": ", answer.message()));
      return;
    }
    rendezvous_response_ = answer.response();
    rank_ = rendezvous_response_.rank();
    size_ = rendezvous_response_.size();
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      ++shared_->rendezvous_done;
      shared_->last_ready_s = SecondsSince(shared_->start);
    }
    set_request_.mutable_who()->CopyFrom(who_);
    set_request_.set_generation(rendezvous_response_.generation());
    set_request_.set_key(absl::StrCat("bench/addr/", rank_));
    set_request_.set_value(AddressValue(rank_));
    stub_->async()->KvSet(&set_context_, &set_request_, &set_response_,
                          [this](grpc::Status status) { OnKvSet(status); });
  }

  void OnKvSet(const grpc::Status& status) {
    if (!status.ok()) {
      shared_->Error(absl::StrCat("KvSet of rank ", rank_, ": ", status.error_message()));
      return;
    }
    get_request_.mutable_who()->CopyFrom(who_);
    get_request_.set_generation(rendezvous_response_.generation());
    get_request_.add_keys(absl::StrCat("bench/addr/", Left()));
    get_request_.add_keys(absl::StrCat("bench/addr/", Right()));
    get_request_.set_timeout_seconds(120);
    stub_->async()->KvGet(&get_context_, &get_request_, &get_response_,
                          [this](grpc::Status status) { OnKvGet(status); });
  }

  void OnKvGet(const grpc::Status& status) {
    if (!status.ok()) {
      shared_->Error(absl::StrCat("KvGet of rank ", rank_, ": ", status.error_message()));
      return;
    }
    if (get_response_.values_size() != 2 || get_response_.values(0) != AddressValue(Left()) ||
        get_response_.values(1) != AddressValue(Right())) {
      shared_->Error(absl::StrCat("rank ", rank_, " read wrong neighbour addresses"));
      return;
    }
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->bootstrap_done;
    shared_->last_bootstrap_s = SecondsSince(shared_->start);
    shared_->cv.notify_all();
  }

  int Left() const { return (rank_ + size_ - 1) % size_; }
  int Right() const { return (rank_ + 1) % size_; }

  v1::WorkerService::Stub* const stub_;
  Shared* const shared_;
  const v1::WorkerIdentity who_;
  int rank_ = -1, size_ = 0;
  std::atomic<int> notifications_{0};
  bool heard_next_generation_ = false;  // the reads' only
  v1::RendezvousResponse rendezvous_response_;
  grpc::ClientContext set_context_;
  v1::KvSetRequest set_request_;
  v1::KvSetResponse set_response_;
  grpc::ClientContext get_context_;
  v1::KvGetRequest get_request_;
  v1::KvGetResponse get_response_;
};

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
      .count();
}

// As the runtime: the daemon's interval, at most a quarter of its 30 s grace
// for an unreachable daemon.
inline int64_t FollowedIntervalUs(int64_t announced_ms) {
  return std::min<int64_t>(announced_ms, 7500) * 1000;
}

// Either way of attaching: a worker's own Attach stream, or its host's.
class SimStream {
 public:
  virtual ~SimStream() = default;
  // From the heartbeat thread, which calls it often: sends one round when
  // the interval (the daemon's as soon as it said) has passed since the
  // last, or since the start (skipped while a write is in flight).
  virtual void Heartbeat(int64_t generation, int64_t now_us) = 0;
  // Its worker `worker_id` died: its stream (or its part of the host's) ends.
  virtual void Lose(int64_t worker_id) = 0;
  virtual int AttachedWorkers() const = 0;
  virtual int64_t heard_interval_ms() const = 0;  // 0: never announced
};

// One simulated worker on its own Attach stream (this reactor), as the
// runtime's DaemonClient has it: hello, then its rendezvous request, then
// heartbeats.
class SimWorker final : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::DaemonMessage>,
                        public SimStream {
 public:
  // Heartbeats every `heartbeat` until the daemon names its own interval,
  // as the runtime's DaemonClient does.
  SimWorker(v1::WorkerService::Stub* stub, Shared* shared, v1::WorkerIdentity who,
            std::chrono::milliseconds heartbeat)
      : stub_(stub), ring_(stub, shared, std::move(who)), interval_us_(heartbeat.count() * 1000) {}

  void Start() {
    last_heartbeat_us_ = NowUs();
    hello_.mutable_hello()->CopyFrom(ring_.who());
    stub_->async()->Attach(&attach_context_, this);
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      writing_ = true;
    }
    // The rendezvous request follows the hello (OnWriteDone), as the
    // runtime asks on its stream.
    ask_.mutable_rendezvous()->set_id(1);
    ask_.mutable_rendezvous()->set_after_generation(0);
    StartWrite(&hello_);
    StartRead(&notification_);
    // Heartbeats start writes from outside the reactor's callbacks, so the
    // stream stays held open until the process exits.
    AddHold();
    StartCall();
  }

  void Heartbeat(int64_t generation, int64_t now_us) override {
    if (now_us - last_heartbeat_us_.load(std::memory_order_relaxed) < interval_us_.load()) return;
    last_heartbeat_us_.store(now_us, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      if (writing_ || done_) return;
      writing_ = true;
    }
    heartbeat_.mutable_heartbeat()->set_generation(generation);
    StartWrite(&heartbeat_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(write_mu_);
    if (ok && !asked_) {
      asked_ = true;
      lock.unlock();
      StartWrite(&ask_);  // writing_ stays set
      return;
    }
    writing_ = false;
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (!notification_.has_rendezvous()) {
      if (const int64_t ms = notification_.heartbeat_interval_ms(); ms > 0) {
        interval_us_.store(FollowedIntervalUs(ms));
        heard_interval_ms_.store(ms);
      }
    }
    ring_.OnMessage(notification_);
    StartRead(&notification_);
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    done_ = true;
  }
  void Lose(int64_t) override { attach_context_.TryCancel(); }
  int AttachedWorkers() const override { return ring_.notifications() > 0 ? 1 : 0; }
  int64_t heard_interval_ms() const override { return heard_interval_ms_.load(); }

 private:
  v1::WorkerService::Stub* const stub_;
  RingWorker ring_;
  grpc::ClientContext attach_context_;
  v1::WorkerMessage hello_, heartbeat_;
  v1::DaemonMessage notification_;
  std::atomic<int64_t> interval_us_;           // the daemon's once it said
  std::atomic<int64_t> last_heartbeat_us_{0};  // written by Start, then the heartbeat thread
  std::atomic<int64_t> heard_interval_ms_{0};
  std::mutex write_mu_;
  bool writing_ = false;   // guarded by write_mu_
  bool done_ = false;      // guarded by write_mu_
  v1::WorkerMessage ask_;  // the rendezvous request
  bool asked_ = false;     // guarded by write_mu_
};

// One simulated host: its workers' Attach traffic on one AttachHost stream
// (this reactor), as a host's aggregator carries it: each worker's hello and
// rendezvous request go up as it starts, one message per heartbeat round
// carries all its workers' heartbeats, and what the daemon sends a worker is
// handed to it. Messages queued while a write is in flight go together in
// the next one.
class SimHost final : public grpc::ClientBidiReactor<v1::HostMessage, v1::HostDaemonMessage>,
                      public SimStream {
 public:
  SimHost(v1::WorkerService::Stub* stub, Shared* shared, std::chrono::milliseconds heartbeat)
      : stub_(stub), shared_(shared), interval_us_(heartbeat.count() * 1000) {}

  // Adds a worker of this host (from the main thread); the first starts the
  // stream. Its hello and rendezvous request go up in the next write.
  void AddWorker(v1::WorkerIdentity who) {
    auto worker = std::make_unique<RingWorker>(stub_, shared_, who);
    const int64_t id = who.worker_id();
    bool start = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      start = workers_.empty();
      workers_[id] = std::move(worker);
      v1::RelayedWorkerMessage* hello = pending_.add_workers();
      hello->set_worker_id(id);
      *hello->mutable_message()->mutable_hello() = std::move(who);
      v1::RelayedWorkerMessage* ask = pending_.add_workers();
      ask->set_worker_id(id);
      ask->mutable_message()->mutable_rendezvous()->set_id(1);
      ask->mutable_message()->mutable_rendezvous()->set_after_generation(0);
    }
    if (start) {
      last_heartbeat_us_ = NowUs();
      stub_->async()->AttachHost(&context_, this);
      WriteNext();
      StartRead(&in_);
      AddHold();  // writes start from outside the callbacks, as SimWorker's
      StartCall();
    } else {
      WriteNext();
    }
  }

  void Heartbeat(int64_t generation, int64_t now_us) override {
    if (now_us - last_heartbeat_us_.load(std::memory_order_relaxed) < interval_us_.load()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || done_) return;  // the write in flight tells the daemon the host lives
      last_heartbeat_us_.store(now_us, std::memory_order_relaxed);
      for (const auto& [id, worker] : workers_) {
        if (lost_.count(id) != 0) continue;
        v1::RelayedWorkerMessage* beat = pending_.add_workers();
        beat->set_worker_id(id);
        beat->mutable_message()->mutable_heartbeat()->set_generation(generation);
      }
    }
    WriteNext();
  }

  void Lose(int64_t worker_id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_.insert(worker_id);
      pending_.add_detached(worker_id);
    }
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) done_ = true;
    }
    WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (const int64_t ms = in_.heartbeat_interval_ms(); ms > 0) {
      interval_us_.store(FollowedIntervalUs(ms));
      heard_interval_ms_.store(ms);
    }
    for (const v1::RelayedDaemonMessage& relayed : in_.workers()) {
      RingWorker* worker = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = workers_.find(relayed.worker_id());
        if (it != workers_.end()) worker = it->second.get();
      }
      if (worker != nullptr) worker->OnMessage(relayed.message());
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  int AttachedWorkers() const override {
    std::lock_guard<std::mutex> lock(mu_);
    int attached = 0;
    for (const auto& [id, worker] : workers_) attached += worker->notifications() > 0 ? 1 : 0;
    return attached;
  }
  int64_t heard_interval_ms() const override { return heard_interval_ms_.load(); }

 private:
  // Starts a write of everything pending, unless one is in flight.
  void WriteNext() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || done_ || (pending_.workers_size() == 0 && pending_.detached_size() == 0)) {
        return;
      }
      writing_ = true;
      in_flight_.Clear();
      in_flight_.Swap(&pending_);
    }
    StartWrite(&in_flight_);
  }

  v1::WorkerService::Stub* const stub_;
  Shared* const shared_;
  grpc::ClientContext context_;
  v1::HostDaemonMessage in_;  // the reads' only
  std::atomic<int64_t> interval_us_;
  std::atomic<int64_t> last_heartbeat_us_{0};
  std::atomic<int64_t> heard_interval_ms_{0};
  mutable std::mutex mu_;
  std::map<int64_t, std::unique_ptr<RingWorker>> workers_;  // guarded by mu_; never shrinks
  std::set<int64_t> lost_;                                  // guarded by mu_
  v1::HostMessage pending_;                                 // guarded by mu_
  v1::HostMessage in_flight_;                               // written by the one write in flight
  bool writing_ = false;                                    // guarded by mu_
  bool done_ = false;                                       // guarded by mu_
};

}  // namespace horovodd::bench
