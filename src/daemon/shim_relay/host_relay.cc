#include "daemon/shim_relay/host_relay.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/pem_file.h"
#include "common/status_macros.h"
#include "daemon/shim_relay/relay_core.h"
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

absl::Status HostRelay::Core::Start() {
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

void HostRelay::Core::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  std::shared_ptr<HostLink> link;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    link = link_;
  }
  if (link) link->Cancel();
  link.reset();  // not ours to keep alive: waited for below
  if (reconnect_.joinable()) reconnect_.join();
  if (server_) server_->Wait();
  absl::MutexLock lock(&mu_);
  auto destroyed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_links_ == 0; };
  mu_.Await(absl::Condition(&destroyed));
}

void HostRelay::Core::LinkDestroyed() {
  absl::MutexLock lock(&mu_);
  --live_links_;
}

int HostRelay::Core::relayed_workers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, member] : members_) n += member.epoch == epoch_ && link_ != nullptr;
  return n;
}

void HostRelay::Core::Hello(const std::shared_ptr<Peer>& peer, int64_t id,
                            const v1::WorkerMessage& hello) {
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

void HostRelay::Core::Forward(const std::shared_ptr<Peer>& peer, int64_t id,
                              v1::WorkerMessage message) {
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

void HostRelay::Core::Gone(const std::shared_ptr<Peer>& peer, int64_t id) {
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

void HostRelay::Core::FromDaemon(HostLink* link, v1::HostDaemonMessage& batch) {
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

void HostRelay::Core::LinkDone(HostLink* link, const grpc::Status& status) {
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
                   << status.error_code() << ": " << status.error_message() << "), " << ended.size()
                   << " worker stream(s) with it";
  }
  for (const auto& peer : ended) peer->End(status);
}

void HostRelay::Core::ReconnectLoop() {
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

bool HostRelay::Core::OpenLink() {
  std::shared_ptr<HostLink> link;
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    ++epoch_;
    ++links_opened_;
    heard_ = false;
    // Counted down once the link, members and all, is destroyed.
    link = std::shared_ptr<HostLink>(new HostLink(this, epoch_), [this](HostLink* gone) {
      delete gone;
      LinkDestroyed();
    });
    ++live_links_;
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
    HVDD_ASSIGN_OR_RETURN(*field, ReadPemFile(path, variable));
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
