// A worker's Attach stream to the relay (host_relay.h), and Peer, the
// handle the relay's core sends to it through. Internal to the relay.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/stream_outbox.h"
#include "daemon/shim_relay/host_relay.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::shim {

// A worker's stream to the relay, as the core sees it: the core hands it
// messages through Peer::Send; the stream cuts the link in its OnDone.
class LocalStream;
struct Peer {
  void Send(const v1::DaemonMessage& message) ABSL_LOCKS_EXCLUDED(mu);
  void End(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu);
  absl::Mutex mu;
  LocalStream* stream ABSL_GUARDED_BY(mu) = nullptr;
};

// A worker's Attach stream to the relay: as the daemon's AttachStream, it
// checks only that a hello comes first; the daemon checks the rest.
class LocalStream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage> {
 public:
  explicit LocalStream(HostRelay::Core* core) : core_(core), peer_(std::make_shared<Peer>()) {
    {
      absl::MutexLock lock(&peer_->mu);
      peer_->stream = this;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override;

  void OnWriteDone(bool ok) override {
    Outbox::AfterWrite after;
    {
      absl::MutexLock lock(&mu_);
      after = outbox_.WriteDone(ok);
    }
    if (after.next != nullptr) StartWrite(after.next);
    if (after.finish.has_value()) Finish(*after.finish);
  }

  void OnDone() override;

  // Queues `message`; returns it when the caller must start its write
  // (StartOwnWrite). While a write is in flight nobody finishes the stream,
  // so it outlives that call. Peer::Send's, under its mutex.
  const v1::DaemonMessage* Enqueue(const v1::DaemonMessage& message) {
    absl::MutexLock lock(&mu_);
    return outbox_.Push(message);
  }
  void StartOwnWrite(const v1::DaemonMessage* message) { StartWrite(message); }

  // Takes the finishing of the stream on (true: the caller calls Finish, and
  // nobody else will, so the stream outlives that call), or leaves it to the
  // write in flight. Peer::End's, under its mutex.
  bool ClaimFinish(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    return outbox_.ClaimFinish(status);
  }
  void FinishNow(const grpc::Status& status) { Finish(status); }

  void EndStream(const grpc::Status& status) {
    if (ClaimFinish(status)) Finish(status);
  }

 private:
  using Outbox = StreamOutbox<v1::DaemonMessage, grpc::Status>;

  HostRelay::Core* const core_;
  const std::shared_ptr<Peer> peer_;
  v1::WorkerMessage in_;   // owned by the read chain
  int64_t worker_id_ = 0;  // from its hello; the read chain's, then OnDone's
  absl::Mutex mu_;
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::shim
