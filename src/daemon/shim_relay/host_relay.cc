#include "daemon/shim_relay/host_relay.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::shim {
namespace {

// As the worker runtime's (daemon_client.cc): messages are small, except
// key values.
constexpr int kMaxMessageBytes = 64 << 20;
// Reconnect pacing while no host stream gets through, as a worker's own.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// The least time one connection attempt to the daemon may take (as the
// runtime's: a loaded daemon is slow to finish a handshake).
constexpr int kConnectAttemptTimeoutMs = 20000;

}  // namespace

// A worker's stream to the relay, as the core sees it: the core hands it
// messages through Peer::Send; the stream cuts the link in its OnDone.
class LocalStream;
struct Peer {
  void Send(const v1::DaemonMessage& message) ABSL_LOCKS_EXCLUDED(mu);
  void End(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu);
  absl::Mutex mu;
  LocalStream* stream ABSL_GUARDED_BY(mu) = nullptr;
};

// One AttachHost call. Whoever queues a message may start the write (see
// Queue); a hold keeps the reactor alive while a write is in flight or the
// call still reads, so OnDone (which hands the end to the core and deletes
// it) comes after both.
class HostLink final : public grpc::ClientBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
 public:
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

class HostRelay::Core final : public v1::WorkerService::CallbackService {
 public:
  explicit Core(HostRelayOptions options) : options_(std::move(options)) {}

  absl::Status Start() {
    grpc::ChannelArguments args;
    // As the runtime's channel: back within a second of a restarted daemon,
    // each attempt given time to finish.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectAttemptTimeoutMs);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    auto credentials =
        options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
    channel_ = grpc::CreateCustomChannel(options_.daemon_address, credentials, args);
    stub_ = v1::WorkerService::NewStub(channel_);

    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen_address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      return absl::UnavailableError(
          absl::StrCat("relay: cannot listen on ", options_.listen_address));
    }
    const std::string host = options_.listen_address.substr(0, options_.listen_address.rfind(':'));
    address_ = absl::StrCat(host, ":", port);
    reconnect_ = std::thread([this] { ReconnectLoop(); });
    return absl::OkStatus();
  }

  // Workers' streams and calls first (their ends reach this core), then the
  // host stream.
  void Shutdown() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    std::shared_ptr<HostLink> link;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      link = link_;
    }
    if (link) link->Cancel();
    if (reconnect_.joinable()) reconnect_.join();
    if (server_) server_->Wait();
  }

  const std::string& address() const { return address_; }
  int64_t host_streams_opened() const {
    absl::MutexLock lock(&mu_);
    return links_opened_;
  }
  int relayed_workers() const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [id, member] : members_) n += member.epoch == epoch_ && link_ != nullptr;
    return n;
  }

  // ---- WorkerService, the workers' side
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* Attach(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override {
    return ForwardCall(context, /*wait_for_ready=*/false,
                       [&](grpc::ClientContext* client, auto done) {
                         stub_->async()->KvSet(client, request, response, std::move(done));
                       });
  }
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override {
    return ForwardCall(context, /*wait_for_ready=*/false,
                       [&](grpc::ClientContext* client, auto done) {
                         stub_->async()->KvGet(client, request, response, std::move(done));
                       });
  }
  // The runtime's commit reports wait for a restarting daemon (until their
  // deadline); so does the relay's.
  grpc::ServerUnaryReactor* ReportCommit(grpc::CallbackServerContext* context,
                                         const v1::CommitReport* request,
                                         v1::Empty* response) override {
    return ForwardCall(context, /*wait_for_ready=*/true,
                       [&](grpc::ClientContext* client, auto done) {
                         stub_->async()->ReportCommit(client, request, response, std::move(done));
                       });
  }
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::FailureReport* request,
                                          v1::Empty* response) override {
    return ForwardCall(context, /*wait_for_ready=*/false,
                       [&](grpc::ClientContext* client, auto done) {
                         stub_->async()->ReportFailure(client, request, response, std::move(done));
                       });
  }
  grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* AttachHost(
      grpc::CallbackServerContext*) override {
    struct Refused : grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
      Refused() {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            "a relay carries workers' Attach streams, not host streams"));
      }
      void OnDone() override { delete this; }
    };
    return new Refused();
  }

  // ---- from the workers' streams (LocalStream)

  // Worker `id` said hello on `peer`: it replaces an earlier stream of the
  // same worker, and is carried on the current host stream, or on the next.
  void Hello(const std::shared_ptr<Peer>& peer, int64_t id, const v1::WorkerMessage& hello) {
    std::shared_ptr<HostLink> link;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      Member& member = members_[id];
      member = Member{};
      member.peer = peer;
      member.hello = hello;
      if (link_ != nullptr) {
        member.epoch = epoch_;
        link = link_;
        start = link->Queue(Relayed(id, hello));
      }
    }
    if (start) link->StartQueuedWrite();
  }

  // A heartbeat or rendezvous of worker `id` (after its hello on `peer`).
  void Forward(const std::shared_ptr<Peer>& peer, int64_t id, v1::WorkerMessage message) {
    std::shared_ptr<HostLink> link;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = members_.find(id);
      if (it == members_.end() || it->second.peer != peer) return;  // superseded
      Member& member = it->second;
      if (member.epoch == 0) {
        // Waiting for a host stream: its rendezvous is asked there; a
        // heartbeat would reach no daemon anyway.
        if (message.has_rendezvous()) member.rendezvous = message.rendezvous();
        return;
      }
      if (link_ == nullptr || member.epoch != epoch_) return;  // its stream is ending
      if (message.has_heartbeat()) member.owes_echo = true;
      link = link_;
      start = link->Queue(Relayed(id, std::move(message)));
    }
    if (start) link->StartQueuedWrite();
  }

  // Worker `id`'s stream `peer` ended: the daemon hears it as the end of
  // that worker's Attach stream, unless a newer stream replaced it.
  void Gone(const std::shared_ptr<Peer>& peer, int64_t id) {
    std::shared_ptr<HostLink> link;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = members_.find(id);
      if (it == members_.end() || it->second.peer != peer) return;
      if (link_ != nullptr && it->second.epoch == epoch_) {
        link = link_;
        start = link->QueueDetached(id);
      }
      members_.erase(it);
    }
    if (start) link->StartQueuedWrite();
  }

  // ---- from the host stream (HostLink)

  void FromDaemon(HostLink* link, v1::HostDaemonMessage& batch) {
    std::vector<std::pair<std::shared_ptr<Peer>, v1::DaemonMessage>> deliveries;
    {
      absl::MutexLock lock(&mu_);
      if (link != link_.get()) return;
      heard_ = true;
      const int64_t interval = batch.heartbeat_interval_ms();
      for (v1::RelayedDaemonMessage& relayed : *batch.mutable_workers()) {
        auto it = members_.find(relayed.worker_id());
        if (it == members_.end() || it->second.epoch != epoch_) continue;
        v1::DaemonMessage& message = *relayed.mutable_message();
        if (message.heartbeat_interval_ms() == 0) message.set_heartbeat_interval_ms(interval);
        it->second.owes_echo = false;
        deliveries.emplace_back(it->second.peer, std::move(message));
      }
      // The daemon answers a host's heartbeat round once: each worker that
      // heartbeated and got nothing else hears it as its own echo.
      for (auto& [id, member] : members_) {
        if (member.epoch != epoch_ || !member.owes_echo) continue;
        member.owes_echo = false;
        v1::DaemonMessage echo;
        echo.set_heartbeat_interval_ms(interval);
        deliveries.emplace_back(member.peer, std::move(echo));
      }
    }
    for (auto& [peer, message] : deliveries) peer->Send(message);
  }

  // The host stream ended: so do the workers' streams it carried, with its
  // status (they reconnect and say hello again, on the next one).
  void LinkDone(HostLink* link, const grpc::Status& status) {
    std::vector<std::shared_ptr<Peer>> ended;
    {
      absl::MutexLock lock(&mu_);
      if (link_.get() == link) {
        link_ = nullptr;
        for (auto it = members_.begin(); it != members_.end();) {
          if (it->second.epoch == link->epoch()) {
            ended.push_back(it->second.peer);
            it = members_.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      HVDD_LOG(INFO) << "relay: the host stream to " << options_.daemon_address << " ended ("
                     << status.error_code() << ": " << status.error_message() << "), "
                     << ended.size() << " worker stream(s) with it";
    }
    for (const auto& peer : ended) peer->End(status);
  }

 private:
  struct Member {
    std::shared_ptr<Peer> peer;
    uint64_t epoch = 0;  // the host stream that carries it; 0: waiting for one
    v1::WorkerMessage hello;
    std::optional<v1::StreamRendezvous> rendezvous;  // asked while waiting
    bool owes_echo = false;  // heartbeated since the daemon last said anything to it
  };

  static v1::RelayedWorkerMessage Relayed(int64_t id, v1::WorkerMessage message) {
    v1::RelayedWorkerMessage relayed;
    relayed.set_worker_id(id);
    *relayed.mutable_message() = std::move(message);
    return relayed;
  }

  // Opens a host stream whenever none is open, paced while none gets through.
  void ReconnectLoop() {
    absl::Duration backoff = kFirstBackoff;
    while (OpenLink()) {
      absl::MutexLock lock(&mu_);
      auto ended = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return link_ == nullptr || stopping_; };
      mu_.Await(absl::Condition(&ended));
      if (stopping_) break;
      backoff = heard_ ? kFirstBackoff : std::min(backoff * 2, kMaxBackoff);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), backoff);
      if (stopping_) break;
    }
    // The link in place was cancelled by Shutdown; its OnDone clears it.
    absl::MutexLock lock(&mu_);
    auto gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return link_ == nullptr; };
    mu_.Await(absl::Condition(&gone));
  }

  // A new host stream, carrying at once the hellos (and rendezvous) of the
  // workers that waited for one; false once stopping. gRPC may run a
  // stream's reactions on the thread that starts an operation, so none is
  // started under mu_.
  bool OpenLink() ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<HostLink> link;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
      ++epoch_;
      ++links_opened_;
      heard_ = false;
      link = std::make_shared<HostLink>(this, epoch_);
      link->Bind(stub_.get(), link);
      link_ = link;
      for (auto& [id, member] : members_) {
        if (member.epoch != 0) continue;
        member.epoch = epoch_;
        start |= link->Queue(Relayed(id, member.hello));
        if (member.rendezvous.has_value()) {
          v1::WorkerMessage ask;
          *ask.mutable_rendezvous() = *member.rendezvous;
          member.rendezvous.reset();
          start |= link->Queue(Relayed(id, std::move(ask)));
        }
      }
    }
    // Its hold keeps it until its read and write end, both started here.
    link->Start();
    if (start) link->StartQueuedWrite();
    return true;
  }

  // A unary call forwarded on the relay's channel with the caller's
  // deadline; the caller's cancel cancels it. Finished from its callback,
  // so the reactor outlives it.
  class ForwardedCall final : public grpc::ServerUnaryReactor {
   public:
    explicit ForwardedCall(grpc::CallbackServerContext* context) {
      client_.set_deadline(context->deadline());
    }
    grpc::ClientContext* client() { return &client_; }
    void OnCancel() override { client_.TryCancel(); }
    void OnDone() override { delete this; }

   private:
    grpc::ClientContext client_;
  };

  template <typename Call>
  grpc::ServerUnaryReactor* ForwardCall(grpc::CallbackServerContext* context, bool wait_for_ready,
                                        Call call) {
    auto* forwarded = new ForwardedCall(context);
    forwarded->client()->set_wait_for_ready(wait_for_ready);
    call(forwarded->client(), [forwarded](grpc::Status status) { forwarded->Finish(status); });
    return forwarded;
  }

  const HostRelayOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::thread reconnect_;

  mutable absl::Mutex mu_;
  std::shared_ptr<HostLink> link_ ABSL_GUARDED_BY(mu_);  // the open host stream, if any
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;              // link_'s, counting from 1
  int64_t links_opened_ ABSL_GUARDED_BY(mu_) = 0;
  bool heard_ ABSL_GUARDED_BY(mu_) = false;  // link_ got something from the daemon
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, Member> members_ ABSL_GUARDED_BY(mu_);  // by worker id
};

void HostLink::OnReadDone(bool ok) {
  if (ok) {
    core_->FromDaemon(this, in_);
    StartRead(&in_);
    return;
  }
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    reading_done_ = true;
    next_.Clear();
    release = !writing_;
  }
  if (release) RemoveHold();
}

void HostLink::OnDone(const grpc::Status& status) {
  core_->LinkDone(this, status);
  self_.reset();  // may delete this
}

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

  void OnReadDone(bool ok) override {
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

  void OnWriteDone(bool ok) override {
    const v1::DaemonMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      outbox_.pop_front();
      if (ok && !outbox_.empty()) {
        next = &outbox_.front();
      } else {
        writing_ = false;
        if (finish_pending_ && !finished_) {
          finished_ = true;
          finish = final_status_;
        }
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&peer_->mu);
      peer_->stream = nullptr;
    }
    if (worker_id_ != 0) core_->Gone(peer_, worker_id_);
    delete this;
  }

  // Queues `message`; returns it when the caller must start its write
  // (StartOwnWrite). While a write is in flight nobody finishes the stream,
  // so it outlives that call. Peer::Send's, under its mutex.
  const v1::DaemonMessage* Enqueue(const v1::DaemonMessage& message) {
    absl::MutexLock lock(&mu_);
    if (finished_ || finish_pending_) return nullptr;
    outbox_.push_back(message);
    if (writing_) return nullptr;
    writing_ = true;
    return &outbox_.front();
  }
  void StartOwnWrite(const v1::DaemonMessage* message) { StartWrite(message); }

  // Takes the finishing of the stream on (true: the caller calls Finish, and
  // nobody else will, so the stream outlives that call), or leaves it to the
  // write in flight. Peer::End's, under its mutex.
  bool ClaimFinish(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_ || finish_pending_) return false;
    if (writing_) {
      finish_pending_ = true;
      final_status_ = status;
      return false;
    }
    finished_ = true;
    return true;
  }
  void FinishNow(const grpc::Status& status) { Finish(status); }

  void EndStream(const grpc::Status& status) {
    if (ClaimFinish(status)) Finish(status);
  }

 private:
  HostRelay::Core* const core_;
  const std::shared_ptr<Peer> peer_;
  v1::WorkerMessage in_;   // owned by the read chain
  int64_t worker_id_ = 0;  // from its hello; the read chain's, then OnDone's
  absl::Mutex mu_;
  std::deque<v1::DaemonMessage> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

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

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> WorkerCredentials(
    const std::map<std::string, std::string>& env) {
  auto get = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (get("HOROVODD_TLS") != "1" && get("HOROVODD_TLS_CA").empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [variable, field] : {std::pair{"HOROVODD_TLS_CA", &ssl.pem_root_certs},
                                        std::pair{"HOROVODD_TLS_CERT", &ssl.pem_cert_chain},
                                        std::pair{"HOROVODD_TLS_KEY", &ssl.pem_private_key}}) {
    const std::string path = get(variable);
    if (path.empty()) continue;
    std::ifstream in(path);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat(variable, ": cannot read ", path, ": ", std::strerror(errno)));
    }
    std::stringstream text;
    text << in.rdbuf();
    *field = text.str();
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::unique_ptr<HostRelay>> HostRelay::Start(HostRelayOptions options) {
  if (options.daemon_address.empty()) {
    return absl::InvalidArgumentError("relay: no daemon address");
  }
  auto core = std::make_unique<Core>(std::move(options));
  if (absl::Status st = core->Start(); !st.ok()) {
    core->Shutdown();
    return st;
  }
  return std::unique_ptr<HostRelay>(new HostRelay(std::move(core)));
}

HostRelay::HostRelay(std::unique_ptr<Core> core) : core_(std::move(core)) {}

HostRelay::~HostRelay() { core_->Shutdown(); }

const std::string& HostRelay::address() const { return core_->address(); }
int64_t HostRelay::host_streams_opened() const { return core_->host_streams_opened(); }
int HostRelay::relayed_workers() const { return core_->relayed_workers(); }

}  // namespace horovodd::shim
