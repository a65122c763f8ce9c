// Counts every gRPC call the daemon's server begins, by method, into Metrics
// (horovodd_rpc_requests_total). Install with
// ServerBuilder::experimental().SetInterceptorCreators().
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "daemon/metrics/metrics.h"

namespace horovodd::daemon {

// `metrics` outlives the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcCounter(
    Metrics* metrics);

}  // namespace horovodd::daemon
