// What the daemon's HTTP server (http_server.h) reads and writes: a request,
// a response (whole, or streamed as server-sent events are), and the pure
// pieces of HTTP/1.1 around them (request heads, percent-encoding, query
// strings and forms, response heads). No sockets here, so all of it is tested
// without a server.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

struct HttpRequest {
  std::string method;                          // "GET", as sent
  std::string target;                          // as sent: "/api/jobs?job=job-1"
  std::string path;                            // the target's path, percent-decoded: "/api/jobs"
  std::map<std::string, std::string> query;    // decoded; a repeated name keeps its last value
  std::map<std::string, std::string> headers;  // names lower-cased; repeats joined with ", "
  std::string body;
  // Where it came from, as gRPC writes peers ("ipv4:127.0.0.1:5000"), so
  // that AccessPolicy reads both alike.
  std::string peer;
  bool tls = false;  // it came over TLS

  // The header's value, or nullopt when it was not sent; `name` lower-case.
  std::optional<std::string> Header(absl::string_view name) const;
  // The query parameter's value, or "" when absent.
  std::string Query(absl::string_view name) const;
};

// Where a streamed response writes. Used on the connection's thread only.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Sends `bytes` now. False once the client is gone, a write made no
  // progress for the server's timeout, or the server is stopping: the
  // stream should return then.
  virtual bool Write(absl::string_view bytes) = 0;
  // Waits `timeout`, or less: false as soon as the client hangs up or the
  // server stops.
  virtual bool Wait(absl::Duration timeout) = 0;
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // More header lines ("Location", "Set-Cookie", "Cache-Control", ...).
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: a streamed answer. Its head goes out without a Content-Length, then
  // `stream` runs on the connection's thread until it returns, and the
  // connection closes (the end of the body). `body` is not sent.
  std::function<void(HttpStream&)> stream;
};

// "OK", "Not Found", ...: the reason phrase of the codes the daemon sends.
const char* HttpReason(int code);

// A plain-text answer: `code` with `text` as its body.
HttpResponse TextResponse(int code, std::string text);

// The request line and header fields of `head` (everything before the blank
// line that ends it). Sets method, target, path, query and headers.
// INVALID_ARGUMENT, naming what is wrong, for a malformed request line (not
// "METHOD TARGET HTTP/x.y") or header line (no "name:").
absl::StatusOr<HttpRequest> ParseRequestHead(absl::string_view head);

// %XX escapes decoded (and '+' read as a space in form and query data);
// a '%' not followed by two hex digits is kept as it is.
std::string PercentDecode(absl::string_view text, bool plus_is_space);
// "a=1&b=x%20y": query strings and application/x-www-form-urlencoded bodies.
std::map<std::string, std::string> ParseFormData(absl::string_view text);
// %XX for every byte that is not unreserved (RFC 3986: letters, digits, -._~).
std::string PercentEncode(absl::string_view text);

// The status line and header fields of `response`, through the blank line:
// Content-Type, Content-Length (`content_length`; none when nullopt, as for
// a stream), Connection: close, then response.headers.
std::string FormatResponseHead(const HttpResponse& response, std::optional<size_t> content_length);

}  // namespace horovodd::daemon
