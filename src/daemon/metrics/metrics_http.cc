#include "daemon/metrics/metrics_http.h"

namespace horovodd::daemon {

HttpResponse AnswerMetricsRequest(const HttpRequest& request, const RenderMetrics& render) {
  if (request.path != "/metrics") return TextResponse(404, "only /metrics is served here\n");
  if (request.method != "GET" && request.method != "HEAD") {
    return TextResponse(405, "/metrics answers GET and HEAD\n");
  }
  HttpResponse page = TextResponse(200, render());
  page.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return page;
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(const std::string& listen,
                                                         RenderMetrics render) {
  HttpServerOptions options;
  options.listen = listen;
  options.name = "metrics";
  return HttpServer::Start(std::move(options),
                           [render = std::move(render)](const HttpRequest& request) {
                             return AnswerMetricsRequest(request, render);
                           });
}

}  // namespace horovodd::daemon
