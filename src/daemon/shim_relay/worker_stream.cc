#include "daemon/shim_relay/worker_stream.h"

#include "daemon/shim_relay/relay_core.h"

namespace horovodd::shim {

void LocalStream::OnReadDone(bool ok) {
  if (!ok) {
    EndStream(grpc::Status::OK);
    return;
  }
  if (in_.has_hello()) {
    if (worker_id_ != 0 && in_.hello().worker_id() != worker_id_) {
      EndStream(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a stream attaches one worker only"));
      return;
    }
    worker_id_ = in_.hello().worker_id();
    core_->Hello(peer_, worker_id_, in_);
  } else if (worker_id_ == 0) {
    if (in_.has_rendezvous()) {
      EndStream(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                             "a rendezvous on an Attach stream must follow its hello"));
      return;
    }
    // A heartbeat before the hello reaches no job, as on the daemon.
  } else {
    core_->Forward(peer_, worker_id_, std::move(in_));
    in_.Clear();
  }
  StartRead(&in_);
}

void LocalStream::OnDone() {
  {
    absl::MutexLock lock(&peer_->mu);
    peer_->stream = nullptr;
  }
  if (worker_id_ != 0) core_->Gone(peer_, worker_id_);
  delete this;
}

// gRPC may run a reaction (OnDone among them, which takes mu) on the thread
// that starts an operation: none is started under mu.
void Peer::Send(const v1::DaemonMessage& message) {
  LocalStream* to = nullptr;
  const v1::DaemonMessage* first = nullptr;
  {
    absl::MutexLock lock(&mu);
    if (stream != nullptr) {
      to = stream;
      first = stream->Enqueue(message);
    }
  }
  if (first != nullptr) to->StartOwnWrite(first);
}

void Peer::End(const grpc::Status& status) {
  LocalStream* to = nullptr;
  {
    absl::MutexLock lock(&mu);
    if (stream != nullptr && stream->ClaimFinish(status)) to = stream;
  }
  if (to != nullptr) to->FinishNow(status);
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* HostRelay::Core::Attach(
    grpc::CallbackServerContext*) {
  return new LocalStream(this);
}

}  // namespace horovodd::shim
