#include "worker_runtime/daemon_client/daemon_client.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/pem_file.h"
#include "common/status_macros.h"
#include "worker_runtime/daemon_client/process_exit.h"

namespace horovodd::internal {
namespace {

// Reconnect and retry pacing; the grace watchdog, not these, decides when to
// give up on the daemon.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// The least time one connection attempt to the daemon may take.
constexpr absl::Duration kConnectAttemptTimeout = absl::Seconds(20);
// KvGet's own deadline is the daemon's timeout plus this, so the daemon's
// answer (with its message) normally arrives first.
constexpr absl::Duration kKvGetMargin = absl::Seconds(5);
// A report that cannot go out this fast is dropped: the next one, or the
// worker's exit, tells the daemon the same. Also bounds the flush at Stop().
constexpr absl::Duration kReportDeadline = absl::Seconds(5);
constexpr size_t kMaxPendingFailures = 16;
constexpr int kMaxMessageBytes = 64 << 20;

// How the daemon ends an Attach stream it will not take (an unknown job, a
// wrong token, a malformed message, too many streams from one client), as
// opposed to a connection lost or a daemon going away.
bool RefusesWorker(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

void ExitForLostDaemon(const DaemonClientOptions& options) {
  HVDD_LOG(ERROR) << "horovodd: lost the daemon at " << options.address << " for "
                  << absl::FormatDuration(options.daemon_grace)
                  << " (its grace period, worker.daemon_grace or HOROVODD_DAEMON_GRACE_S), "
                     "exiting";
  ExitProcess(ExitReason::kDaemonLost);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const DaemonClientOptions& options) {
  if (!options.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  for (const auto& [path, variable, field] :
       {std::tuple{&options.tls_ca_file, "HOROVODD_TLS_CA", &ssl.pem_root_certs},
        std::tuple{&options.tls_cert_file, "HOROVODD_TLS_CERT", &ssl.pem_cert_chain},
        std::tuple{&options.tls_key_file, "HOROVODD_TLS_KEY", &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    HVDD_ASSIGN_OR_RETURN(*field, ReadPemFile(*path, variable));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Create(DaemonClientOptions options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("daemon address is empty");
  }
  if (options.heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat interval must be positive, got ",
                     absl::FormatDuration(options.heartbeat_interval)));
  }
  grpc::ChannelArguments args;
  // Come back quickly when the daemon restarts (gRPC's default backoff grows
  // to two minutes, far past the grace period): retry a refused connection
  // within a second. (The calls that wait for the daemon are wait_for_ready:
  // see RunOneStream.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // But give each attempt time to finish: gRPC reads this as the least time
  // a connection attempt (TCP, TLS, the HTTP/2 settings) may take, and cuts
  // an attempt off at max(it, the current backoff), so at 100 ms a daemon
  // slow to answer on a loaded machine was dropped mid-handshake.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(kConnectAttemptTimeout)));
  // Control traffic only, small messages: BDP probing would only add a ping
  // (and the daemon's answer) per burst, which adds up over thousands of
  // workers on one daemon.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                        ChannelCredentialsFor(options));
  auto channel = grpc::CreateCustomChannel(options.address, credentials, args);
  return std::unique_ptr<DaemonClient>(new DaemonClient(std::move(options), channel));
}

DaemonClient::DaemonClient(DaemonClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::WorkerService::NewStub(channel_)),
      heartbeat_interval_us_(absl::ToInt64Microseconds(options_.heartbeat_interval)) {}

DaemonClient::~DaemonClient() { Stop(); }

v1::WorkerIdentity DaemonClient::Identity() const {
  v1::WorkerIdentity who;
  who.set_job_id(options_.job_id);
  who.set_worker_id(options_.worker_id);
  who.set_token(options_.token);
  return who;
}

void DaemonClient::StartAttach() {
  if (started_ || stopping_) return;
  started_ = true;
  {
    absl::MutexLock lock(&contact_mu_);
    last_contact_ = absl::Now();
  }
  attach_thread_ = std::thread([this] { AttachLoop(); });
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  reporter_thread_ = std::thread([this] { ReporterLoop(); });
}

void DaemonClient::Stop() {
  if (started_) {
    // Reports first, while the stream still counts as contact.
    {
      absl::MutexLock lock(&report_mu_);
      reporter_done_ = true;
      flush_deadline_ = absl::Now() + kReportDeadline;
      report_cv_.SignalAll();
    }
    reporter_thread_.join();
  }
  {
    absl::MutexLock lock(&contact_mu_);
    stopping_ = true;
    stop_cv_.SignalAll();
  }
  {
    // Under the mutex, so a Rendezvous between its check and its wait cannot
    // miss this.
    absl::MutexLock lock(&rendezvous_mu_);
    rendezvous_cv_.SignalAll();
  }
  {
    absl::MutexLock lock(&context_mu_);
    if (stream_context_ != nullptr) stream_context_->TryCancel();
  }
  if (started_) {
    attach_thread_.join();
    heartbeat_thread_.join();
    started_ = false;
  }
}

bool DaemonClient::SleepUnlessStopping(absl::Duration d) {
  const absl::Time deadline = absl::Now() + d;
  absl::MutexLock lock(&contact_mu_);
  while (!stopping_) {
    if (stop_cv_.WaitWithDeadline(&contact_mu_, deadline)) return !stopping_;
  }
  return false;
}

bool DaemonClient::SleepUntilNextHeartbeat(absl::Time last) {
  absl::MutexLock lock(&contact_mu_);
  while (!stopping_) {
    // Read again on every wake-up: FollowHeartbeatInterval signals.
    const absl::Time next = last + heartbeat_interval();
    if (absl::Now() >= next) return true;
    stop_cv_.WaitWithDeadline(&contact_mu_, next);
  }
  return false;
}

void DaemonClient::MarkContact() {
  absl::MutexLock lock(&contact_mu_);
  last_contact_ = absl::Now();
}

// ---------------------------------------------------------------------------
// Calls (caller's thread)
// ---------------------------------------------------------------------------

absl::StatusOr<v1::RendezvousResponse> DaemonClient::Rendezvous(int64_t after_generation) {
  if (!started_) {
    return absl::FailedPreconditionError(
        "rendezvous before StartAttach: it is asked on the Attach stream");
  }
  {
    absl::MutexLock lock(&rendezvous_mu_);
    v1::StreamRendezvous ask;
    ask.set_id(++rendezvous_id_);
    ask.set_after_generation(after_generation);
    rendezvous_ask_ = std::move(ask);
    rendezvous_answer_.reset();
  }
  {
    // Without a stream now, the attach thread asks once it has one.
    absl::MutexLock lock(&write_mu_);
    if (stream_ != nullptr) AskPendingRendezvousLocked();
  }
  absl::MutexLock lock(&rendezvous_mu_);
  while (!stopping_ && !rendezvous_answer_.has_value()) rendezvous_cv_.Wait(&rendezvous_mu_);
  if (!rendezvous_answer_.has_value()) {
    rendezvous_ask_.reset();
    return absl::CancelledError(absl::StrCat("rendezvous with the daemon at ", options_.address,
                                             " given up: the runtime is shutting down"));
  }
  v1::StreamRendezvousAnswer answer = std::move(*rendezvous_answer_);
  rendezvous_answer_.reset();
  if (answer.code() != 0) {
    return absl::Status(
        static_cast<absl::StatusCode>(answer.code()),
        absl::StrCat("rendezvous after generation ", after_generation, " with the daemon at ",
                     options_.address, ": ", answer.message()));
  }
  return std::move(*answer.mutable_response());
}

void DaemonClient::AskPendingRendezvousLocked() {
  v1::WorkerMessage message;
  {
    absl::MutexLock lock(&rendezvous_mu_);
    // Twice on one stream would make the daemon refuse the first as superseded.
    if (!rendezvous_ask_.has_value() || rendezvous_ask_->id() == asked_on_stream_) return;
    *message.mutable_rendezvous() = *rendezvous_ask_;
  }
  asked_on_stream_ = message.rendezvous().id();
  // A failed write means the stream is ending: the next one asks again.
  stream_->Write(message);
}

void DaemonClient::DeliverRendezvous(const v1::StreamRendezvousAnswer& answer, bool any_id) {
  absl::MutexLock lock(&rendezvous_mu_);
  if (!rendezvous_ask_.has_value()) return;
  // An answer to an earlier request (from before a reconnect) is stale.
  if (!any_id && rendezvous_ask_->id() != answer.id()) return;
  rendezvous_ask_.reset();
  rendezvous_answer_ = answer;
  rendezvous_cv_.SignalAll();
}

absl::Status DaemonClient::KvSet(int64_t generation, const std::string& key, std::string value) {
  v1::KvSetRequest request;
  *request.mutable_who() = Identity();
  request.set_generation(generation);
  request.set_key(key);
  request.set_value(std::move(value));
  grpc::ClientContext context;
  SetDeadline(context, options_.call_timeout);
  v1::KvSetResponse response;
  grpc::Status status = stub_->KvSet(&context, request, &response);
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("setting key '", key, "' of generation ", generation,
                                         " at ", options_.address));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> DaemonClient::KvGet(int64_t generation,
                                                             const std::vector<std::string>& keys,
                                                             absl::Duration timeout) {
  v1::KvGetRequest request;
  *request.mutable_who() = Identity();
  request.set_generation(generation);
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
  grpc::ClientContext context;
  SetDeadline(context, timeout + kKvGetMargin);
  v1::KvGetResponse response;
  grpc::Status status = stub_->KvGet(&context, request, &response);
  const std::string first_key = keys.empty() ? "" : keys.front();
  if (!status.ok()) {
    return FromGrpc(status,
                    absl::StrCat("getting ", keys.size(), " key(s) (first '", first_key,
                                 "') of generation ", generation, " at ", options_.address));
  }
  if (static_cast<size_t>(response.values_size()) != keys.size()) {
    return absl::InternalError(absl::StrCat("the daemon at ", options_.address, " answered ",
                                            response.values_size(), " values for ", keys.size(),
                                            " keys (first '", first_key, "')"));
  }
  return std::vector<std::string>(response.values().begin(), response.values().end());
}

// ---------------------------------------------------------------------------
// Reports (queued by the caller, sent by the reporter thread)
// ---------------------------------------------------------------------------

void DaemonClient::ReportCommit(int64_t generation, int64_t commit) {
  v1::CommitReport report;
  *report.mutable_who() = Identity();
  report.set_generation(generation);
  report.set_commit(commit);
  absl::MutexLock lock(&report_mu_);
  pending_commit_ = std::move(report);
  report_cv_.Signal();
}

void DaemonClient::ReportFailure(int64_t generation, std::string message) {
  absl::MutexLock lock(&report_mu_);
  if (pending_failures_.size() >= kMaxPendingFailures) pending_failures_.pop_front();
  pending_failures_.push_back({generation, std::move(message)});
  report_cv_.Signal();
}

void DaemonClient::ReporterLoop() {
  absl::MutexLock lock(&report_mu_);
  while (true) {
    while (!reporter_done_ && !pending_commit_.has_value() && pending_failures_.empty()) {
      report_cv_.Wait(&report_mu_);
    }
    const absl::Time deadline = std::min(absl::Now() + kReportDeadline, flush_deadline_);
    // Failures first: they start the daemon's recovery.
    if (!pending_failures_.empty()) {
      PendingFailure failure = std::move(pending_failures_.front());
      pending_failures_.pop_front();
      report_mu_.Unlock();
      SendFailure(failure, deadline);
      report_mu_.Lock();
    } else if (pending_commit_.has_value()) {
      v1::CommitReport report = std::move(*pending_commit_);
      pending_commit_.reset();
      report_mu_.Unlock();
      const bool sent = SendCommit(report, deadline);
      report_mu_.Lock();
      if (!sent && !reporter_done_) {
        // The daemon is away (restarting): the commit waits for it, unless
        // a newer one replaced it meanwhile. Retried after a pause, or at
        // once when something new is queued.
        if (!pending_commit_.has_value()) pending_commit_ = std::move(report);
        report_cv_.WaitWithTimeout(&report_mu_, kMaxBackoff);
      }
    } else {
      return;  // done and drained
    }
  }
}

// False when the daemon could not be reached (the reporter keeps the commit
// for it); any other error drops the report: reports are advisory.
bool DaemonClient::SendCommit(const v1::CommitReport& report, absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  context.set_wait_for_ready(true);  // until the deadline, as the Attach stream does
  v1::Empty response;
  const grpc::Status status = stub_->ReportCommit(&context, report, &response);
  return status.error_code() != grpc::StatusCode::UNAVAILABLE &&
         status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

void DaemonClient::SendFailure(const PendingFailure& failure, absl::Time deadline) {
  v1::FailureReport report;
  *report.mutable_who() = Identity();
  report.set_generation(failure.generation);
  report.set_message(failure.message);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::Empty response;
  stub_->ReportFailure(&context, report, &response);
}

// ---------------------------------------------------------------------------
// Attach stream (attach and heartbeat threads)
// ---------------------------------------------------------------------------

void DaemonClient::AttachLoop() {
  absl::Duration backoff = kFirstBackoff;
  while (!stopping_) {
    if (RunOneStream()) backoff = kFirstBackoff;
    if (!SleepUnlessStopping(backoff)) return;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

bool DaemonClient::RunOneStream() {
  grpc::ClientContext context;
  // Waits for the channel instead of failing at once while it reconnects.
  // This is what brings a worker back quickly after a daemon restart: with
  // gRPC's synchronous API (1.51, iomgr) a connection attempt only moves on
  // while some call polls for it, and fail-fast calls made while the channel
  // is in TRANSIENT_FAILURE return before they poll, so the attempt waited
  // for the client channel's backup poller (every 5 s) and workers came back
  // 5-8 s after the daemon did. A waiting call polls until it is connected.
  context.set_wait_for_ready(true);
  {
    absl::MutexLock lock(&context_mu_);
    if (stopping_) return false;
    stream_context_ = &context;  // from here on Stop() can cancel it
  }
  std::unique_ptr<AttachStream> stream = stub_->Attach(&context);
  v1::WorkerMessage hello;
  *hello.mutable_hello() = Identity();
  bool heard = false;
  bool read_to_end = false;
  if (stream->Write(hello)) {
    {
      absl::MutexLock lock(&write_mu_);
      stream_ = stream.get();
      asked_on_stream_ = 0;
      AskPendingRendezvousLocked();
    }
    v1::DaemonMessage message;
    while (stream->Read(&message)) {
      heard = true;
      MarkContact();
      FollowHeartbeatInterval(message.heartbeat_interval_ms());
      if (message.has_rendezvous()) {
        DeliverRendezvous(message.rendezvous());
        continue;  // it announces nothing else
      }
      int64_t newest = newest_generation_.load();
      while (message.generation() > newest &&
             !newest_generation_.compare_exchange_weak(newest, message.generation())) {
      }
      if (options_.on_message) options_.on_message(message.generation(), message.abort());
    }
    read_to_end = true;
  }
  // A stream read to its end carries the daemon's status (or Stop()'s
  // cancel), and cancelling now would replace it with CANCELLED. One whose
  // hello could not be written is cancelled: that releases a heartbeat Write
  // blocked on it and makes Finish return even if the daemon holds it open.
  if (!read_to_end) context.TryCancel();
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;
  }
  {
    absl::MutexLock lock(&context_mu_);
    stream_context_ = nullptr;
  }
  const grpc::Status status = stream->Finish();
  if (RefusesWorker(status)) {
    // Asking again on the next stream would only be refused again: the
    // caller hears why now, instead of the grace period's "lost the daemon".
    v1::StreamRendezvousAnswer refusal;
    refusal.set_code(status.error_code());
    refusal.set_message(absl::StrCat("its Attach stream was refused: ", status.error_message()));
    DeliverRendezvous(refusal, /*any_id=*/true);
  }
  return heard;
}

void DaemonClient::FollowHeartbeatInterval(int64_t interval_ms) {
  if (interval_ms <= 0) return;
  const absl::Duration interval = std::min(
      absl::Milliseconds(interval_ms), std::max(options_.daemon_grace / 4, absl::Milliseconds(1)));
  const int64_t interval_us = absl::ToInt64Microseconds(interval);
  if (heartbeat_interval_us_.load() == interval_us) return;
  // Under the sleeper's mutex, so the heartbeat thread cannot miss it.
  absl::MutexLock lock(&contact_mu_);
  heartbeat_interval_us_.store(interval_us);
  stop_cv_.SignalAll();
}

void DaemonClient::HeartbeatLoop() {
  // The daemon's answer to the hello usually changes the interval while the
  // first sleep is on; that sleep then ends at the new interval.
  absl::Time last = absl::Now();
  while (SleepUntilNextHeartbeat(last)) {
    last = absl::Now();
    bool sent = false;
    v1::WorkerMessage message;
    message.mutable_heartbeat()->set_generation(current_generation_.load());
    if (options_.activity) *message.mutable_heartbeat()->mutable_activity() = options_.activity();
    {
      absl::MutexLock lock(&write_mu_);
      if (stream_ != nullptr) sent = stream_->Write(message);
    }
    // A Write only reaches the transport's buffers; a READY channel is what
    // says the daemon's end is still there (a relay's end says nothing of it:
    // the daemon's echo, relayed, does).
    if (sent && !options_.relayed && channel_->GetState(false) == GRPC_CHANNEL_READY) {
      MarkContact();
    }
    absl::Time last_contact;
    {
      absl::MutexLock lock(&contact_mu_);
      last_contact = last_contact_;
    }
    if (absl::Now() - last_contact > options_.daemon_grace) {
      if (options_.on_daemon_lost) {
        options_.on_daemon_lost();
      } else {
        ExitForLostDaemon(options_);
      }
      return;
    }
  }
}

}  // namespace horovodd::internal
