// The relay's upward stream (host_relay.h): one AttachHost call to the
// daemon, carrying every relayed worker's messages up in batches and the
// daemon's answers down to the relay's core. Internal to the relay.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/shim_relay/host_relay.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::shim {

// One AttachHost call. Whoever queues a message may start the write (see
// Queue); a hold keeps the reactor alive while a write is in flight or the
// call still reads, so OnDone (which hands the end to the core and deletes
// it) comes after both.
class HostLink final : public grpc::ClientBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
 public:
  // The core counts it live (OpenLink) until its shared_ptr's deleter says
  // it is wholly destroyed.
  HostLink(HostRelay::Core* core, uint64_t epoch) : core_(core), epoch_(epoch) {}

  // Binds the call and holds it; no message moves before Start().
  void Bind(v1::WorkerService::Stub* stub, std::shared_ptr<HostLink> self) {
    self_ = std::move(self);
    context_.set_wait_for_ready(true);  // as a worker's Attach: waits for the daemon
    stub->async()->AttachHost(&context_, this);
    AddHold();
    StartRead(&in_);
  }
  void Start() { StartCall(); }
  void Cancel() { context_.TryCancel(); }
  uint64_t epoch() const { return epoch_; }

  // Adds `message` to the next write; true when the caller must start it
  // (StartQueuedWrite) because none is in flight.
  // A heartbeat replaces its worker's one still queued: while the daemon
  // is away (the write in flight waits for it) the queue stays bounded by
  // the host's workers, and the daemon gets each worker's newest.
  bool Queue(v1::RelayedWorkerMessage message) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (reading_done_) return false;
    if (message.message().has_heartbeat()) {
      for (v1::RelayedWorkerMessage& queued : *next_.mutable_workers()) {
        if (queued.worker_id() == message.worker_id() && queued.message().has_heartbeat()) {
          queued = std::move(message);
          return TakeNextLocked();
        }
      }
    }
    *next_.add_workers() = std::move(message);
    return TakeNextLocked();
  }
  bool QueueDetached(int64_t worker_id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (reading_done_) return false;
    next_.add_detached(worker_id);
    return TakeNextLocked();
  }
  void StartQueuedWrite() { StartWrite(&in_flight_); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override {
    bool chain = false;
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (ok && !reading_done_) {
        chain = TakeNextLocked();
      } else {
        next_.Clear();
      }
      release = reading_done_ && !writing_;
    }
    if (chain) StartQueuedWrite();
    if (release) RemoveHold();
  }
  void OnDone(const grpc::Status& status) override;

 private:
  // Moves what is queued into the write buffer when no write is in flight.
  bool TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || (next_.workers_size() == 0 && next_.detached_size() == 0)) return false;
    in_flight_.Clear();
    in_flight_.Swap(&next_);
    writing_ = true;
    return true;
  }

  HostRelay::Core* const core_;
  const uint64_t epoch_;
  std::shared_ptr<HostLink> self_;  // until OnDone
  grpc::ClientContext context_;
  v1::HostDaemonMessage in_;  // owned by the read chain
  absl::Mutex mu_;
  v1::HostMessage in_flight_;  // stays put until OnWriteDone
  v1::HostMessage next_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::shim
