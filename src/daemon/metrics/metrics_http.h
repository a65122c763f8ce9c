// A minimal HTTP/1.1 server for Prometheus scrapes: GET (or HEAD) /metrics
// answers with the page `render` produces, any other path 404, any other
// method 405. Each connection gets one answer and is closed.
//
// Threading: one thread owns every socket and polls them; `render` runs on it.
// Bounded so a client cannot exhaust the daemon: request heads past
// kMaxRequestBytes get 431, at most kMaxConnections are open at once, and a
// connection that has not been answered within kConnectionTimeout is closed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace horovodd::daemon {

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;

  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 32;
  static constexpr absl::Duration kConnectionTimeout = absl::Seconds(10);

  // Listens on `listen` ("host:port", "[::1]:port"; port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                                  Render render);
  // Stops the thread and closes every socket.
  ~MetricsHttpServer();

  // host:port actually bound, e.g. "127.0.0.1:39521".
  const std::string& address() const { return address_; }

 private:
  MetricsHttpServer(UniqueFd listener, UniqueFd wake_read, UniqueFd wake_write, Render render,
                    std::string address);
  void Run();

  const Render render_;
  const std::string address_;
  UniqueFd listener_;
  UniqueFd wake_read_;  // readable once the destructor wants the thread gone
  UniqueFd wake_write_;
  std::thread thread_;
};

}  // namespace horovodd::daemon
