// One accepted HTTP connection's bytes, plain or under TLS, read and written
// with deadlines on its non-blocking socket. Every wait also watches the
// server's stop descriptor, so a stopping server never waits on a client.
//
// Threading: used by the one thread that serves the connection.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/config/auth_settings.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace horovodd::daemon {

// The server's side of TLS, made once from the daemon's `tls` settings: its
// certificate chain and key and, with client_ca_file, the CA whose
// certificate every client must present (mutual TLS), as on the gRPC
// listener. TLS 1.2 at least.
class TlsServerContext {
 public:
  // INVALID_ARGUMENT naming the setting and file that cannot be used.
  static absl::StatusOr<std::unique_ptr<TlsServerContext>> Create(const TlsSettings& settings);
  ~TlsServerContext();
  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsServerContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* const ctx_;
};

class HttpConnection {
 public:
  // `fd` is non-blocking; `stop_fd` becomes readable when the server stops;
  // `tls` null for plain HTTP.
  HttpConnection(UniqueFd fd, int stop_fd, const TlsServerContext* tls);
  ~HttpConnection();  // closes (a TLS close_notify first, if it can go at once)

  // The TLS handshake (nothing for plain HTTP). DEADLINE_EXCEEDED, CANCELLED
  // (the server stops) or UNAVAILABLE (the client failed it or left).
  absl::Status Handshake(absl::Time deadline);
  // Appends what arrives, at most `max_bytes`, once something has: the count
  // read (0: the client closed its side). DEADLINE_EXCEEDED, CANCELLED or
  // UNAVAILABLE as above.
  absl::StatusOr<size_t> Read(std::string& into, size_t max_bytes, absl::Time deadline);
  // Sends all of `bytes`; false when the client is gone, the server stops or
  // no byte could be sent for `stall` at any point.
  bool WriteAll(absl::string_view bytes, absl::Duration stall);
  // Waits up to `timeout` for nothing to happen: false as soon as the client
  // hangs up (or sends anything: a client of a stream has nothing to say)
  // or the server stops.
  bool WaitIdle(absl::Duration timeout);
  // After an answer sent before the whole request was read (a refusal):
  // reads and drops what the client still sends, up to `timeout`, so that
  // closing with unread bytes does not reset the connection before the
  // client has read the answer.
  void DrainBeforeClose(absl::Duration timeout);

 private:
  enum class Ready { kIo, kStop, kTimeout, kHangUp };
  // Waits until the socket is ready for `events` (POLLIN/POLLOUT), the
  // server stops or `deadline` passes.
  Ready WaitFor(short events, absl::Time deadline);
  // WaitFor as a status: OK when ready, else CANCELLED (the server stops),
  // DEADLINE_EXCEEDED or UNAVAILABLE (the client left), naming `what`.
  absl::Status WaitForIo(short events, absl::Time deadline, const char* what);
  // After an SSL call returned `result` <= 0: the poll events it waits for,
  // or 0 when the connection is done for.
  short SslWants(int result);

  UniqueFd fd_;
  const int stop_fd_;
  const bool tls_;
  SSL* ssl_ = nullptr;  // the TLS session; null for plain HTTP
};

}  // namespace horovodd::daemon
