// The relay's core (host_relay.h): it serves WorkerService to the host's
// workers and keeps which of them the current host stream carries. Its
// parts: host_relay.cc (the host stream's reconnect loop and the workers'
// membership), worker_stream.cc (a worker's Attach stream),
// host_link.cc (the host stream), forwarded_calls.cc (the unary calls).
// Internal to the relay.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/shim_relay/host_link.h"
#include "daemon/shim_relay/host_relay.h"
#include "daemon/shim_relay/worker_stream.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::shim {

class HostRelay::Core final : public v1::WorkerService::CallbackService {
 public:
  explicit Core(HostRelayOptions options) : options_(std::move(options)) {}

  absl::Status Start();

  // Workers' streams and calls first (their ends reach this core), then the
  // host stream.
  void Shutdown();

  const std::string& address() const { return address_; }
  int64_t host_streams_opened() const {
    absl::MutexLock lock(&mu_);
    return links_opened_;
  }
  int relayed_workers() const;

  // ---- WorkerService, the workers' side
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* Attach(
      grpc::CallbackServerContext* context) override;  // worker_stream.cc
  // The unary calls, forwarded as they are (forwarded_calls.cc).
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerUnaryReactor* ReportCommit(grpc::CallbackServerContext* context,
                                         const v1::CommitReport* request,
                                         v1::Empty* response) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::FailureReport* request,
                                          v1::Empty* response) override;
  grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* AttachHost(
      grpc::CallbackServerContext* context) override;

  // ---- from the workers' streams (LocalStream)

  // Worker `id` said hello on `peer`: it replaces an earlier stream of the
  // same worker, and is carried on the current host stream, or on the next.
  void Hello(const std::shared_ptr<Peer>& peer, int64_t id, const v1::WorkerMessage& hello);

  // A heartbeat or rendezvous of worker `id` (after its hello on `peer`).
  void Forward(const std::shared_ptr<Peer>& peer, int64_t id, v1::WorkerMessage message);

  // Worker `id`'s stream `peer` ended: the daemon hears it as the end of
  // that worker's Attach stream, unless a newer stream replaced it.
  void Gone(const std::shared_ptr<Peer>& peer, int64_t id);

  // ---- from the host stream (HostLink)

  void FromDaemon(HostLink* link, v1::HostDaemonMessage& batch);

  // The host stream ended: so do the workers' streams it carried, with its
  // status (they reconnect and say hello again, on the next one).
  void LinkDone(HostLink* link, const grpc::Status& status);
  // A HostLink is wholly destroyed, its ClientContext with it (OpenLink's
  // deleter): nothing of it touches gRPC or this core any more.
  void LinkDestroyed();

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
  void ReconnectLoop();

  // A new host stream, carrying at once the hellos (and rendezvous) of the
  // workers that waited for one; false once stopping. gRPC may run a
  // stream's reactions on the thread that starts an operation, so none is
  // started under mu_.
  bool OpenLink() ABSL_LOCKS_EXCLUDED(mu_);

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
  // HostLinks not destroyed yet: Shutdown waits for none, so that no reactor
  // of the relay's outlives it (its OnDone still ran after LinkDone, racing
  // the core's and the process's end). Counted down after the whole object
  // is gone: a count in the destructor's body let Shutdown return while the
  // link's ClientContext was still being destroyed on a gRPC thread (a test
  // process then aborted at exit in gRPC's ref_counted.h: prior > 0).
  int live_links_ ABSL_GUARDED_BY(mu_) = 0;
  bool heard_ ABSL_GUARDED_BY(mu_) = false;  // link_ got something from the daemon
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, Member> members_ ABSL_GUARDED_BY(mu_);  // by worker id
};

}  // namespace horovodd::shim
