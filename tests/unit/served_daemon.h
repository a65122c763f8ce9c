// A real DaemonServer on a free loopback port with an admin JobService stub,
// for tests of the job API over gRPC, and the deadline their calls carry.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <utility>

#include <catch2/catch.hpp>

#include "cli/client_credentials.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::testing {

// "Did not hang", not an expectation.
inline constexpr int kCallDeadlineSeconds = 60;

struct ServedDaemon {
  std::unique_ptr<daemon::DaemonServer> server;
  std::unique_ptr<v1::JobService::Stub> stub;

  explicit ServedDaemon(daemon::DaemonOptions options = {}) {
    options.listen_address = "127.0.0.1:0";
    auto started = daemon::DaemonServer::Start(options);
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    server = std::move(*started);
    stub = v1::JobService::NewStub(cli::CreateDaemonChannel(
        server->address(), grpc::InsecureChannelCredentials(), server->admin_token()));
  }
};

inline void SetCallDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(kCallDeadlineSeconds));
}

}  // namespace horovodd::testing
