// The Prometheus endpoint: GET (or HEAD) /metrics answers with the page
// `render` produces, any other path 404, any other method 405; served by the
// daemon's HTTP server (http/http_server.h), plain HTTP: the page holds
// counts, no tokens or job specs.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/http/http_message.h"
#include "daemon/http/http_server.h"

namespace horovodd::daemon {

using RenderMetrics = std::function<std::string()>;

// Serves /metrics on `listen` ("host:port", "[::1]:port"; port 0 picks a free
// one). Errors as HttpServer::Start's ("cannot serve metrics on ...").
absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(const std::string& listen,
                                                         RenderMetrics render);

// The answer to one request.
HttpResponse AnswerMetricsRequest(const HttpRequest& request, const RenderMetrics& render);

}  // namespace horovodd::daemon
