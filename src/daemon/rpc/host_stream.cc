#include "daemon/rpc/host_stream.h"

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/rpc/grpc_status.h"
#include "daemon/rpc/host_outbox.h"
#include "daemon/rpc/worker_service.h"
#include "daemon/validation/request_validation.h"
#include "daemon/workers/worker_channel.h"

namespace horovodd::daemon {
namespace {

class HostStream final : public grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
 public:
  HostStream(grpc::CallbackServerContext* context, JobManager* jobs, AccessPolicy* access,
             const DaemonLimits* limits, const HeartbeatSchedule* heartbeats,
             ClientStreamLimiter::Slot slot)
      : context_(context),
        jobs_(jobs),
        access_(access),
        limits_(limits),
        heartbeats_(heartbeats),
        slot_(std::move(slot)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndStream(grpc::Status::OK);
      return;
    }
    std::vector<JobDriver::WorkerHeartbeat> heartbeats;
    for (v1::RelayedWorkerMessage& relayed : *in_.mutable_workers()) {
      if (absl::Status st = ValidateRequest(relayed.message(), *limits_); !st.ok()) {
        EndStream(ToGrpcStatus(st));
        return;
      }
      const int64_t id = relayed.worker_id();
      v1::WorkerMessage& message = *relayed.mutable_message();
      if (message.has_hello()) {
        if (grpc::Status st = Hello(id, message.hello()); !st.ok()) {
          EndStream(st);
          return;
        }
      } else if (message.has_heartbeat()) {
        if (members_.count(id) == 0) continue;  // as on Attach: no job before a hello
        // A report that does not pass is dropped; the heartbeat still counts.
        JobDriver::WorkerHeartbeat& heartbeat = heartbeats.emplace_back();
        heartbeat.worker_id = id;
        if (message.heartbeat().has_activity() &&
            ValidateWorkerActivity(message.heartbeat().activity()).ok()) {
          heartbeat.activity = std::move(*message.mutable_heartbeat()->mutable_activity());
        }
      } else if (message.has_rendezvous()) {
        auto member = members_.find(id);
        if (member == members_.end()) {
          EndStream(
              grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                           absl::StrCat("a rendezvous of worker ", id, " must follow its hello")));
          return;
        }
        Rendezvous(id, member->second, message.rendezvous());
      }
    }
    for (int64_t id : in_.detached()) Detach(id);
    if (!heartbeats.empty()) {
      driver_->Heartbeats(std::move(heartbeats));
      Echo();
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::HostDaemonMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) outbox_.Close();
      next = outbox_.WriteDone();
      if (next == nullptr && finish_pending_ && !finished_) {
        finished_ = true;
        finish = final_status_;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }

  void OnDone() override {
    while (!members_.empty()) Detach(members_.begin()->first);
    {
      absl::MutexLock lock(&self_->mu);
      self_->stream = nullptr;
    }
    delete this;
  }

 private:
  // This stream for whoever outlives it: a batch's flush (Enqueue).
  struct Self {
    explicit Self(HostStream* stream) : stream(stream) {}
    absl::Mutex mu;
    HostStream* stream ABSL_GUARDED_BY(mu);
  };

  // One relayed worker, as its job's driver sees it.
  struct Relayed : WorkerChannel {
    explicit Relayed(HostStream* stream, int64_t worker_id)
        : stream(stream), worker_id(worker_id) {}
    void Send(const v1::DaemonMessage& message) override {
      absl::MutexLock lock(&mu);
      if (stream != nullptr) stream->Enqueue(worker_id, message);
    }
    absl::Mutex mu;
    HostStream* stream ABSL_GUARDED_BY(mu);
    const int64_t worker_id;
  };

  // Worker `id`'s hello: checked as on its own Attach stream. A second
  // hello of the same worker re-attaches it (its runtime reconnected).
  grpc::Status Hello(int64_t id, const v1::WorkerIdentity& who) {
    if (who.worker_id() != id) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("a hello relayed for worker ", id, " names worker ", who.worker_id()));
    }
    auto driver = jobs_->Find(who.job_id());
    if (!driver) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", who.job_id(), "'"));
    }
    if (absl::Status st = access_->AuthorizeWorker(*context_, "AttachHost", driver->job_id(),
                                                   who.token(), driver->worker_token());
        !st.ok()) {
      return ToGrpcStatus(st);
    }
    if (driver_ && driver_ != driver) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a host stream carries the workers of one job only");
    }
    if (!driver_) {
      driver_ = std::move(driver);
      if (heartbeats_ != nullptr) {
        // Before the first Attach: the driver's answer to it is the first
        // message to carry it.
        absl::MutexLock lock(&mu_);
        heartbeat_interval_ms_ = heartbeats_->IntervalMs(driver_->job_id());
        outbox_.set_heartbeat_interval_ms(heartbeat_interval_ms_);
      }
    }
    std::shared_ptr<Relayed>& channel = members_[id];
    if (!channel) channel = std::make_shared<Relayed>(this, id);
    driver_->Attach(id, channel);
    return grpc::Status::OK;
  }

  void Detach(int64_t id) {
    auto it = members_.find(id);
    if (it == members_.end()) return;
    {
      absl::MutexLock lock(&it->second->mu);
      it->second->stream = nullptr;
    }
    driver_->Detach(id, it->second.get());
    members_.erase(it);
  }

  // As AttachStream's: the answer goes through the worker's channel, which
  // drops it if the stream ended meanwhile.
  void Rendezvous(int64_t id, const std::shared_ptr<Relayed>& channel,
                  const v1::StreamRendezvous& ask) {
    v1::RendezvousRequest request;
    request.mutable_who()->set_job_id(driver_->job_id());
    request.mutable_who()->set_worker_id(id);
    request.set_after_generation(ask.after_generation());
    driver_->Rendezvous(request, [channel, ask_id = ask.id()](auto result) {
      v1::DaemonMessage message;
      v1::StreamRendezvousAnswer* answer = message.mutable_rendezvous();
      answer->set_id(ask_id);
      if (result.ok()) {
        *answer->mutable_response() = std::move(*result);
      } else {
        answer->set_code(static_cast<int>(result.status().code()));
        answer->set_message(std::string(result.status().message()));
      }
      channel->Send(message);
    });
  }

  // Within a ChannelBatch the message waits for the batch to close, when
  // everything the batch sent this host goes in one write.
  void Enqueue(int64_t worker_id, v1::DaemonMessage message) {
    ChannelBatch* batch = ChannelBatch::Current();
    const v1::HostDaemonMessage* first = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || finish_pending_) return;
      // Every message says it, as on an Attach stream, for relays that pass
      // them on as they are.
      if (heartbeat_interval_ms_ > 0) message.set_heartbeat_interval_ms(heartbeat_interval_ms_);
      if (batch == nullptr) {
        first = outbox_.Add(worker_id, std::move(message));
      } else {
        outbox_.Hold(worker_id, std::move(message));
        if (!flush_deferred_) {
          flush_deferred_ = true;
          batch->Defer([self = self_] {
            absl::MutexLock lock(&self->mu);
            if (self->stream != nullptr) self->stream->FlushHeld();
          });
        }
      }
    }
    if (first != nullptr) StartWrite(first);
  }

  // The batch that held messages here closed.
  void FlushHeld() {
    const v1::HostDaemonMessage* first = nullptr;
    {
      absl::MutexLock lock(&mu_);
      flush_deferred_ = false;
      if (finished_ || finish_pending_) return;
      first = outbox_.Flush();
    }
    if (first != nullptr) StartWrite(first);
  }

  // Each heartbeat round is answered (an empty batch), so the host hears the
  // daemon itself; nothing while a write is in flight: that one tells it.
  void Echo() {
    const v1::HostDaemonMessage* echo = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || finish_pending_) return;
      echo = outbox_.Echo();
    }
    if (echo != nullptr) StartWrite(echo);
  }

  void EndStream(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || finish_pending_) return;
      if (outbox_.writing()) {
        finish_pending_ = true;
        final_status_ = status;
        outbox_.Close();
        return;
      }
      outbox_.Close();
      finished_ = true;
    }
    Finish(status);
  }

  grpc::CallbackServerContext* const context_;
  JobManager* const jobs_;
  AccessPolicy* const access_;
  const DaemonLimits* const limits_;
  const HeartbeatSchedule* const heartbeats_;
  ClientStreamLimiter::Slot slot_;
  v1::HostMessage in_;                 // owned by the read chain
  std::shared_ptr<JobDriver> driver_;  // set by the first hello, by the read chain
  // The workers it carries (the read chain's, then OnDone's).
  std::map<int64_t, std::shared_ptr<Relayed>> members_;
  absl::Mutex mu_;
  HostOutbox outbox_ ABSL_GUARDED_BY(mu_);
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_deferred_ ABSL_GUARDED_BY(mu_) = false;  // a batch will flush what it held
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<Self> self_ = std::make_shared<Self>(this);
};

}  // namespace

grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* NewHostStream(
    grpc::CallbackServerContext* context, JobManager* jobs, AccessPolicy* access,
    const DaemonLimits* limits, const HeartbeatSchedule* heartbeats,
    ClientStreamLimiter::Slot slot) {
  return new HostStream(context, jobs, access, limits, heartbeats, std::move(slot));
}

}  // namespace horovodd::daemon
