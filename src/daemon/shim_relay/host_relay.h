// The relay a host's shim runs for its workers (docs/architecture/
// shim-protocol.md#the-relay): it serves WorkerService on a loopback port of
// the host, the address the shim gives its workers as HOROVODD_DAEMON_ADDR,
// and carries what they send to the daemon on one channel:
//   - every worker's Attach stream on one AttachHost stream (HostMessage up,
//     HostDaemonMessage down), so the daemon holds one stream per host;
//   - the unary calls (KvSet, KvGet, ReportCommit, ReportFailure) forwarded
//     as they are, with the caller's deadline, on the same channel.
// The workers see what a direct stream shows them: the daemon's messages
// (its echo of a heartbeat round reaches each worker that heartbeated), its
// refusals and errors. When the host stream ends (the daemon died or
// restarted, or refused the stream) every worker stream it carried ends
// with its status, so each worker reconnects and says hello again as it
// would to a restarted daemon; the relay opens the next host stream at once
// (then with a backoff up to a second while none gets through) and carries
// the hellos that wait for it.
//
// Threads: gRPC's callback threads run everything; a reconnect thread opens
// host streams. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace horovodd::shim {

struct HostRelayOptions {
  std::string daemon_address;  // where the daemon serves its workers (host:port)
  // The channel's credentials (the workers' TLS settings); null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Where the workers' side listens; the port is picked when it is 0.
  std::string listen_address = "127.0.0.1:0";
};

class HostRelay {
 public:
  // Listens, and starts the first host stream (it waits for the daemon).
  static absl::StatusOr<std::unique_ptr<HostRelay>> Start(HostRelayOptions options);
  // Ends the workers' streams and calls (CANCELLED) and the host stream.
  ~HostRelay();

  HostRelay(const HostRelay&) = delete;
  HostRelay& operator=(const HostRelay&) = delete;

  // What the workers dial ("127.0.0.1:PORT").
  const std::string& address() const;
  // Host streams opened so far (1 until the first one ends).
  int64_t host_streams_opened() const;
  // Workers whose stream the current host stream carries now.
  int relayed_workers() const;

  class Core;

 private:
  explicit HostRelay(std::unique_ptr<Core> core);
  std::unique_ptr<Core> core_;
};

// The channel credentials a worker with environment `env` would dial the
// daemon with (HOROVODD_TLS, HOROVODD_TLS_CA/CERT/KEY: PEM files, as the
// runtime reads them): the relay speaks for it.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> WorkerCredentials(
    const std::map<std::string, std::string>& env);

// The variables of a worker's environment the relay changes: the address
// it dials, and this one, "1", which tells the runtime that a heartbeat
// written to its end says nothing about the daemon (only the daemon's
// answers do, so its grace period counts as with a direct stream).
inline constexpr char kDaemonRelayedVariable[] = "HOROVODD_DAEMON_RELAYED";

}  // namespace horovodd::shim
