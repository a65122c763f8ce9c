// The daemon's HTTP server (daemon/http/): request heads, percent-encoding
// and forms parsed without a socket; then a real server on loopback
// answering whole, with a body read by its Content-Length, streaming, and
// ending a stream at once when it stops.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/http/http_message.h"
#include "daemon/http/http_server.h"
#include "http_exchange.h"

using namespace horovodd::daemon;

namespace {

// A client connection to "127.0.0.1:PORT" that the test reads at its own pace.
class Client {
 public:
  explicit Client(const std::string& address) : fd_(horovodd::test::ConnectToLoopback(address)) {}
  ~Client() { Close(); }
  void Send(const std::string& text) {
    REQUIRE(send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
  }
  // Reads until `text` has arrived (true) or the server closed (false).
  bool ReadUntil(const std::string& text) {
    while (!absl::StrContains(received_, text)) {
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, n);
    }
    return true;
  }
  // Reads until the server closes; everything received.
  const std::string& ReadAll() {
    ReadUntil(std::string(1, '\0') + "never");
    return received_;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string received_;
};

std::unique_ptr<HttpServer> Serve(HttpServer::Handler handler) {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  options.name = "the test page";
  auto server = HttpServer::Start(std::move(options), std::move(handler));
  REQUIRE(server.ok());
  return std::move(*server);
}

}  // namespace

TEST_CASE("a request head: method, target, decoded path and query, headers by lower-case name") {
  auto request = ParseRequestHead(
      "POST /api/hosts/node%2D1/drain?job=job-2&x=a+b%21 HTTP/1.1\r\n"
      "Host: 127.0.0.1:8080\r\nCookie: a=1\r\ncookie: b=2\r\nX-Empty:\r\n");
  REQUIRE(request.ok());
  CHECK(request->method == "POST");
  CHECK(request->target == "/api/hosts/node%2D1/drain?job=job-2&x=a+b%21");
  CHECK(request->path == "/api/hosts/node-1/drain");
  CHECK(request->Query("job") == "job-2");
  CHECK(request->Query("x") == "a b!");
  CHECK(request->Query("missing").empty());
  CHECK(request->Header("host") == std::optional<std::string>("127.0.0.1:8080"));
  CHECK(request->Header("cookie") == std::optional<std::string>("a=1, b=2"));
  CHECK(request->Header("x-empty") == std::optional<std::string>(""));
  CHECK(request->Header("authorization") == std::nullopt);

  for (const char* bad : {"nonsense", "GET /metrics", "GET /metrics FTP/1.0", "GET  /x HTTP/1.1",
                          "GET /x HTTP/1.1\r\nno colon here"}) {
    CHECK(ParseRequestHead(bad).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("percent-encoding and form data") {
  CHECK(PercentDecode("a%20b+c%2", false) == "a b+c%2");
  CHECK(PercentDecode("a%20b+c", true) == "a b c");
  CHECK(PercentDecode("%zz%4A", false) == "%zzJ");
  CHECK(PercentEncode("job-1_a.b~c") == "job-1_a.b~c");
  CHECK(PercentEncode("a b/c;d=e") == "a%20b%2Fc%3Bd%3De");
  CHECK(PercentDecode(PercentEncode("any \x01 bytes; \"quoted\""), false) ==
        "any \x01 bytes; \"quoted\"");
  const auto form = ParseFormData("token=ab%2Bc&empty=&flag&token2=x+y");
  CHECK(form.at("token") == "ab+c");
  CHECK(form.at("empty").empty());
  CHECK(form.at("flag").empty());
  CHECK(form.at("token2") == "x y");
}

TEST_CASE("a response head: status, type, length unless streamed, close, then extra headers") {
  HttpResponse response = TextResponse(303, "");
  response.headers.push_back({"Location", "/"});
  CHECK(FormatResponseHead(response, 0) ==
        "HTTP/1.1 303 See Other\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 0\r\nConnection: close\r\nLocation: /\r\n\r\n");
  response.content_type = "text/event-stream";
  CHECK(!absl::StrContains(FormatResponseHead(response, std::nullopt), "Content-Length"));
}

TEST_CASE("the server reads a body by its Content-Length and tells the handler the peer") {
  std::string seen_body, seen_peer;
  auto server = Serve([&](const HttpRequest& request) {
    seen_body = request.body;
    seen_peer = request.peer;
    return TextResponse(200, "got " + request.method + "\n");
  });
  const std::string answer = horovodd::test::HttpExchange(
      server->address(),
      "POST /login HTTP/1.1\r\nContent-Length: 11\r\nContent-Type: x\r\n\r\ntoken=abcde");
  CHECK(absl::StartsWith(answer, "HTTP/1.1 200 OK\r\n"));
  CHECK(absl::EndsWith(answer, "\r\n\r\ngot POST\n"));
  CHECK(seen_body == "token=abcde");
  CHECK(absl::StartsWith(seen_peer, "ipv4:127.0.0.1:"));
  CHECK(server->url() == "http://" + server->address());

  const std::string huge =
      "POST /login HTTP/1.1\r\nContent-Length: " + std::to_string(HttpServer::kMaxBodyBytes + 1) +
      "\r\n\r\n";
  CHECK(absl::StartsWith(horovodd::test::HttpExchange(server->address(), huge),
                         "HTTP/1.1 413 Content Too Large"));
  CHECK(absl::StartsWith(
      horovodd::test::HttpExchange(server->address(),
                                   "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
      "HTTP/1.1 501 Not Implemented"));
}

TEST_CASE("a streamed answer goes out as it is written, and a stopping server ends it at once") {
  std::atomic<bool> stream_returned{false};
  absl::Notification streaming;
  auto server = Serve([&](const HttpRequest&) {
    HttpResponse response;
    response.content_type = "text/event-stream";
    response.stream = [&](HttpStream& out) {
      out.Write("data: first\n\n");
      streaming.Notify();
      // Would wait a minute between writes; the server's stop ends it.
      while (out.Wait(absl::Minutes(1)) && out.Write("data: more\n\n")) {
      }
      stream_returned = true;
    };
    return response;
  });
  Client client(server->address());
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(client.ReadUntil("data: first\n\n"));
  streaming.WaitForNotification();
  const auto before = std::chrono::steady_clock::now();
  server.reset();
  CHECK(std::chrono::steady_clock::now() - before < std::chrono::seconds(30));
  CHECK(stream_returned);
  const std::string& all = client.ReadAll();
  CHECK(absl::StartsWith(all, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"));
  CHECK(!absl::StrContains(all, "Content-Length"));
}

TEST_CASE("a stream ends when its client hangs up") {
  absl::Notification ended;
  auto server = Serve([&](const HttpRequest&) {
    HttpResponse response;
    response.stream = [&](HttpStream& out) {
      out.Write("hello\n");
      while (out.Wait(absl::Minutes(1))) {
      }
      ended.Notify();
    };
    return response;
  });
  {
    Client client(server->address());
    client.Send("GET / HTTP/1.1\r\n\r\n");
    REQUIRE(client.ReadUntil("hello\n"));
  }
  CHECK(ended.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

TEST_CASE("HEAD gets the head of the answer, and a streamed one never runs") {
  std::atomic<bool> streamed{false};
  auto server = Serve([&](const HttpRequest& request) {
    HttpResponse response = TextResponse(200, "12345");
    if (request.path == "/stream") response.stream = [&](HttpStream&) { streamed = true; };
    return response;
  });
  const std::string head =
      horovodd::test::HttpExchange(server->address(), "HEAD / HTTP/1.1\r\n\r\n");
  CHECK(absl::StrContains(head, "Content-Length: 5\r\n"));
  CHECK(absl::EndsWith(head, "\r\n\r\n"));
  const std::string stream_head =
      horovodd::test::HttpExchange(server->address(), "HEAD /stream HTTP/1.1\r\n\r\n");
  CHECK(absl::StartsWith(stream_head, "HTTP/1.1 200 OK\r\n"));
  CHECK(absl::EndsWith(stream_head, "\r\n\r\n"));
  CHECK_FALSE(streamed);
}
