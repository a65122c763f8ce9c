#include "daemon/rpc/worker_service.h"

#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/stream_outbox.h"
#include "daemon/rpc/grpc_status.h"
#include "daemon/rpc/host_stream.h"
#include "daemon/validation/request_validation.h"
#include "daemon/workers/heartbeat_interval.h"

namespace horovodd::daemon {
namespace {

// One worker's Attach stream: heartbeats and rendezvous requests come in,
// notifications and rendezvous answers go out. The driver holds the Channel;
// the stream may end first, so the channel's link to the stream is cut
// (under its mutex) in OnDone.
class AttachStream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage> {
 public:
  // `slot` counts the stream against its client's limit until it ends.
  AttachStream(grpc::CallbackServerContext* context, JobManager* jobs, AccessPolicy* access,
               const DaemonLimits* limits, const HeartbeatSchedule* heartbeats,
               ClientStreamLimiter::Slot slot)
      : context_(context),
        jobs_(jobs),
        access_(access),
        limits_(limits),
        heartbeats_(heartbeats),
        slot_(std::move(slot)),
        channel_(std::make_shared<Channel>()) {
    channel_->stream = this;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndStream(grpc::Status::OK);
      return;
    }
    if (absl::Status st = ValidateRequest(in_, *limits_); !st.ok()) {
      EndStream(ToGrpcStatus(st));
      return;
    }
    if (in_.has_hello()) {
      auto driver = jobs_->Find(in_.hello().job_id());
      if (!driver) {
        EndStream(grpc::Status(grpc::StatusCode::NOT_FOUND,
                               absl::StrCat("no job '", in_.hello().job_id(), "'")));
        return;
      }
      // Until a hello passes this, heartbeats reach no job.
      if (absl::Status st = access_->AuthorizeWorker(*context_, "Attach", driver->job_id(),
                                                     in_.hello().token(), driver->worker_token());
          !st.ok()) {
        EndStream(ToGrpcStatus(st));
        return;
      }
      if (driver_ && driver_ != driver) {
        EndStream(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a stream attaches to one job only"));
        return;
      }
      driver_ = std::move(driver);
      worker_id_ = in_.hello().worker_id();
      if (heartbeats_ != nullptr) {
        // Before Attach: the driver's answer to the hello is the first
        // message to carry it.
        absl::MutexLock lock(&mu_);
        heartbeat_interval_ms_ = heartbeats_->IntervalMs(driver_->job_id());
      }
      driver_->Attach(worker_id_, channel_);
    } else if (in_.has_heartbeat() && driver_) {
      // A report that does not pass is dropped; the heartbeat still counts.
      std::optional<v1::WorkerActivity> activity;
      if (in_.heartbeat().has_activity() &&
          ValidateWorkerActivity(in_.heartbeat().activity()).ok()) {
        activity = std::move(*in_.mutable_heartbeat()->mutable_activity());
      }
      driver_->Heartbeat(worker_id_, std::move(activity));
      EchoHeartbeat();
    } else if (in_.has_rendezvous()) {
      if (!driver_) {
        EndStream(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                               "a rendezvous on an Attach stream must follow its hello"));
        return;
      }
      Rendezvous(in_.rendezvous());
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    Outbox::AfterWrite after;
    {
      absl::MutexLock lock(&mu_);
      after = outbox_.WriteDone(ok);
    }
    if (after.next != nullptr) StartWrite(after.next);
    if (after.finish.has_value()) Finish(*after.finish);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&channel_->mu);
      channel_->stream = nullptr;
    }
    if (driver_) driver_->Detach(worker_id_, channel_.get());
    delete this;
  }

 private:
  using Outbox = StreamOutbox<v1::DaemonMessage, grpc::Status>;

  struct Channel : WorkerChannel {
    absl::Mutex mu;
    AttachStream* stream ABSL_GUARDED_BY(mu) = nullptr;
    void Send(const v1::DaemonMessage& message) override {
      absl::MutexLock lock(&mu);
      if (stream != nullptr) stream->Enqueue(message);
    }
  };

  // The driver answers on its loop, maybe after this stream ended: the answer
  // goes through the channel, which drops it then (the worker asks again on
  // its next stream).
  void Rendezvous(const v1::StreamRendezvous& ask) {
    v1::RendezvousRequest request;
    request.mutable_who()->set_job_id(driver_->job_id());
    request.mutable_who()->set_worker_id(worker_id_);
    request.set_after_generation(ask.after_generation());
    driver_->Rendezvous(request, [channel = channel_, id = ask.id()](auto result) {
      v1::DaemonMessage message;
      v1::StreamRendezvousAnswer* answer = message.mutable_rendezvous();
      answer->set_id(id);
      if (result.ok()) {
        *answer->mutable_response() = std::move(*result);
      } else {
        answer->set_code(static_cast<int>(result.status().code()));
        answer->set_message(std::string(result.status().message()));
      }
      channel->Send(message);
    });
  }

  void Enqueue(const v1::DaemonMessage& message) {
    const v1::DaemonMessage* first = nullptr;
    {
      absl::MutexLock lock(&mu_);
      v1::DaemonMessage queued = message;
      // Every message says it, so the worker follows it from its first one on.
      if (heartbeat_interval_ms_ > 0) queued.set_heartbeat_interval_ms(heartbeat_interval_ms_);
      first = outbox_.Push(std::move(queued));
    }
    if (first != nullptr) StartWrite(first);
  }

  // Heartbeats go both ways: each one the worker sends is answered with an
  // empty message (generation 0, no abort: the runtime ignores it), so the
  // worker hears the daemon itself, not only its own transport. Nothing is
  // queued while a write is in flight: that one already tells the worker.
  void EchoHeartbeat() {
    {
      absl::MutexLock lock(&mu_);
      if (outbox_.writing() || outbox_.closing()) return;
    }
    Enqueue(v1::DaemonMessage());
  }

  void EndStream(grpc::Status status) {
    bool finish_now = false;
    {
      absl::MutexLock lock(&mu_);
      finish_now = outbox_.ClaimFinish(status);
    }
    if (finish_now) Finish(status);
  }

  grpc::CallbackServerContext* const context_;
  JobManager* const jobs_;
  AccessPolicy* const access_;
  const DaemonLimits* const limits_;           // the service's; outlives its streams
  const HeartbeatSchedule* const heartbeats_;  // may be null; outlives its streams
  ClientStreamLimiter::Slot slot_;
  std::shared_ptr<Channel> channel_;
  v1::WorkerMessage in_;               // owned by the read chain
  std::shared_ptr<JobDriver> driver_;  // set on hello, by the read chain
  int64_t worker_id_ = 0;
  absl::Mutex mu_;
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
  int64_t heartbeat_interval_ms_ ABSL_GUARDED_BY(mu_) = 0;  // 0: announce none
};

// An Attach refused before it starts (its client holds too many already).
class RefusedStream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage> {
 public:
  explicit RefusedStream(const absl::Status& why) { Finish(ToGrpcStatus(why)); }
  void OnDone() override { delete this; }
};

class RefusedHostStream final
    : public grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
 public:
  explicit RefusedHostStream(const absl::Status& why) { Finish(ToGrpcStatus(why)); }
  void OnDone() override { delete this; }
};

}  // namespace

void HeartbeatSchedule::OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                                       absl::Time, const std::string&) {
  const int64_t ms = absl::ToInt64Milliseconds(HeartbeatIntervalOf(spec));
  absl::MutexLock lock(&mu_);
  interval_ms_[job_id] = ms;
}

void HeartbeatSchedule::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  if (event.kind() != v1::JobEvent::JOB_ENDED) return;
  absl::MutexLock lock(&mu_);
  interval_ms_.erase(job_id);
}

int64_t HeartbeatSchedule::IntervalMs(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = interval_ms_.find(job_id);
  return it == interval_ms_.end() ? 0 : it->second;
}

void ConfigureWorkerServer(grpc::ServerBuilder& builder, const DaemonLimits& limits) {
  // gRPC refuses a bigger request itself (RESOURCE_EXHAUSTED), before it is
  // read into memory whole.
  builder.SetMaxReceiveMessageSize(limits.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

void WorkerServiceImpl::set_limits(const DaemonLimits& limits) {
  limits_ = limits;
  attach_streams_ = MakeAttachLimiter(limits_);
}

std::unique_ptr<ClientStreamLimiter> WorkerServiceImpl::MakeAttachLimiter(
    const DaemonLimits& limits) {
  return std::make_unique<ClientStreamLimiter>("Attach", "limits.max_attach_streams_per_client",
                                               limits.max_attach_streams_per_client);
}

std::string WorkerServiceImpl::RenderMetrics() const {
  return absl::StrCat(
      "# HELP horovodd_attach_streams Workers' own Attach streams open now.\n"
      "# TYPE horovodd_attach_streams gauge\n"
      "horovodd_attach_streams ",
      attach_open_->load(),
      "\n"
      "# HELP horovodd_host_streams AttachHost streams open now (one per host whose "
      "workers a relay carries).\n"
      "# TYPE horovodd_host_streams gauge\n"
      "horovodd_host_streams ",
      host_open_->load(), "\n");
}

template <typename Request>
bool WorkerServiceImpl::Accepted(const Request& request, grpc::ServerUnaryReactor* reactor) const {
  absl::Status st = ValidateRequest(request, limits_);
  if (!st.ok()) reactor->Finish(ToGrpcStatus(st));
  return st.ok();
}

std::shared_ptr<JobDriver> WorkerServiceImpl::JobOf(grpc::CallbackServerContext* context,
                                                    const char* method,
                                                    const v1::WorkerIdentity& who,
                                                    grpc::ServerUnaryReactor* reactor) {
  auto driver = jobs_->Find(who.job_id());
  if (!driver) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", who.job_id(), "'")));
    return nullptr;
  }
  if (absl::Status st = access_->AuthorizeWorker(*context, method, driver->job_id(), who.token(),
                                                 driver->worker_token());
      !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return nullptr;
  }
  return driver;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::KvSet(grpc::CallbackServerContext* context,
                                                   const v1::KvSetRequest* request,
                                                   v1::KvSetResponse*) {
  auto* reactor = context->DefaultReactor();
  if (auto driver = JobOf(context, "KvSet", request->who(), reactor);
      driver && Accepted(*request, reactor)) {
    driver->KvSet(*request, [reactor](absl::Status st) { reactor->Finish(ToGrpcStatus(st)); });
  }
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::KvGet(grpc::CallbackServerContext* context,
                                                   const v1::KvGetRequest* request,
                                                   v1::KvGetResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (auto driver = JobOf(context, "KvGet", request->who(), reactor);
      driver && Accepted(*request, reactor)) {
    driver->KvGet(*request, [reactor, response](auto result) {
      if (result.ok()) *response = std::move(*result);
      reactor->Finish(ToGrpcStatus(result.status()));
    });
  }
  return reactor;
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* WorkerServiceImpl::Attach(
    grpc::CallbackServerContext* context) {
  auto slot = attach_streams_->Acquire(context->peer());
  if (!slot.ok()) return new RefusedStream(slot.status());
  slot->CountIn(attach_open_);
  return new AttachStream(context, jobs_, access_, &limits_, heartbeats_, std::move(*slot));
}

grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* WorkerServiceImpl::AttachHost(
    grpc::CallbackServerContext* context) {
  auto slot = attach_streams_->Acquire(context->peer());
  if (!slot.ok()) return new RefusedHostStream(slot.status());
  slot->CountIn(host_open_);
  return NewHostStream(context, jobs_, access_, &limits_, heartbeats_, std::move(*slot));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportCommit(grpc::CallbackServerContext* context,
                                                          const v1::CommitReport* request,
                                                          v1::Empty*) {
  auto* reactor = context->DefaultReactor();
  if (auto driver = JobOf(context, "ReportCommit", request->who(), reactor);
      driver && Accepted(*request, reactor)) {
    driver->ReportCommit(*request);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportFailure(grpc::CallbackServerContext* context,
                                                           const v1::FailureReport* request,
                                                           v1::Empty*) {
  auto* reactor = context->DefaultReactor();
  if (auto driver = JobOf(context, "ReportFailure", request->who(), reactor);
      driver && Accepted(*request, reactor)) {
    driver->ReportFailure(*request);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace horovodd::daemon
