#include "daemon/http/http_connection.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

// OpenSSL's queued errors, oldest first, as one line (the queue is emptied).
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long error = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(error, buffer, sizeof(buffer));
    absl::StrAppend(&text, text.empty() ? "" : "; ", buffer);
  }
  return text.empty() ? "no detail from OpenSSL" : text;
}

absl::Status BadFile(const char* setting, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(setting, " '", path, "': ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Create(
    const TlsSettings& settings) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) return absl::InternalError(absl::StrCat("TLS: ", OpenSslErrors()));
  std::unique_ptr<TlsServerContext> context(new TlsServerContext(raw));
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  // Writes may complete in parts, and a retried write may come from a
  // buffer that moved (a std::string).
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(raw, settings.cert_file.c_str()) != 1) {
    return BadFile("tls.cert_file", settings.cert_file, OpenSslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(raw, settings.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return BadFile("tls.key_file", settings.key_file, OpenSslErrors());
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return BadFile("tls.key_file", settings.key_file,
                   absl::StrCat("not the key of tls.cert_file '", settings.cert_file, "'"));
  }
  if (!settings.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, settings.client_ca_file.c_str(), nullptr) != 1) {
      return BadFile("tls.client_ca_file", settings.client_ca_file, OpenSslErrors());
    }
    // Tells clients which CAs to pick their certificate by.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(settings.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(raw, names);
    }
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return context;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

HttpConnection::HttpConnection(UniqueFd fd, int stop_fd, const TlsServerContext* tls)
    : fd_(std::move(fd)), stop_fd_(stop_fd), tls_(tls != nullptr) {
  if (tls_) {
    ssl_ = SSL_new(tls->get());
    if (ssl_ != nullptr) {
      SSL_set_fd(ssl_, fd_.get());
      SSL_set_accept_state(ssl_);
    }
  }
}

HttpConnection::~HttpConnection() {
  if (ssl_ != nullptr) {
    // Best effort: a close_notify if it can go now; the socket closes anyway.
    if (SSL_is_init_finished(ssl_)) {
      ERR_clear_error();
      SSL_shutdown(ssl_);
    }
    SSL_free(ssl_);
    ERR_clear_error();
  }
}

HttpConnection::Ready HttpConnection::WaitFor(short events, absl::Time deadline) {
  while (true) {
    // Polls at least once, so a deadline already past still sees what is ready.
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
      timeout_ms = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
    }
    pollfd fds[2] = {{fd_.get(), events, 0}, {stop_fd_, POLLIN, 0}};
    const int rc = poll(fds, 2, timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return Ready::kHangUp;
    }
    if (fds[1].revents != 0) return Ready::kStop;
    if (fds[0].revents & (POLLERR | POLLNVAL)) return Ready::kHangUp;
    // A hang-up with data still unread shows as readable: the read finds the end.
    if (fds[0].revents & (events | POLLHUP)) return Ready::kIo;
    if (rc == 0 && absl::Now() >= deadline) return Ready::kTimeout;
  }
}

absl::Status HttpConnection::WaitForIo(short events, absl::Time deadline, const char* what) {
  switch (WaitFor(events, deadline)) {
    case Ready::kIo:
      return absl::OkStatus();
    case Ready::kStop:
      return absl::CancelledError("the server is stopping");
    case Ready::kTimeout:
      return absl::DeadlineExceededError(absl::StrCat(what, " took too long"));
    case Ready::kHangUp:
      break;
  }
  return absl::UnavailableError(absl::StrCat("the client left during ", what));
}

short HttpConnection::SslWants(int result) {
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    default:
      return 0;
  }
}

absl::Status HttpConnection::Handshake(absl::Time deadline) {
  if (!tls_) return absl::OkStatus();
  // Never fall back to plain HTTP on a TLS listener.
  if (ssl_ == nullptr) return absl::InternalError(absl::StrCat("TLS: ", OpenSslErrors()));
  while (true) {
    ERR_clear_error();
    const int rc = SSL_accept(ssl_);
    if (rc == 1) return absl::OkStatus();
    const short wants = SslWants(rc);
    if (wants == 0) {
      return absl::UnavailableError(absl::StrCat("TLS handshake failed: ", OpenSslErrors()));
    }
    HVDD_RETURN_IF_ERROR(WaitForIo(wants, deadline, "the TLS handshake"));
  }
}

absl::StatusOr<size_t> HttpConnection::Read(std::string& into, size_t max_bytes,
                                            absl::Time deadline) {
  char buffer[4096];
  const size_t wanted = std::min(sizeof(buffer), std::max<size_t>(max_bytes, 1));
  while (true) {
    short wants = POLLIN;
    if (tls_) {
      if (ssl_ == nullptr) return absl::InternalError("TLS: no session");
      ERR_clear_error();
      const int rc = SSL_read(ssl_, buffer, static_cast<int>(wanted));
      if (rc > 0) {
        into.append(buffer, rc);
        return static_cast<size_t>(rc);
      }
      const int error = SSL_get_error(ssl_, rc);
      // A close_notify, or the client closing without one: either way it is done.
      if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0)) return 0;
      wants = SslWants(rc);
      if (wants == 0) return absl::UnavailableError(absl::StrCat("TLS: ", OpenSslErrors()));
    } else {
      const ssize_t n = recv(fd_.get(), buffer, wanted, 0);
      if (n > 0) {
        into.append(buffer, n);
        return static_cast<size_t>(n);
      }
      if (n == 0) return 0;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return absl::UnavailableError("the connection failed");
      }
    }
    HVDD_RETURN_IF_ERROR(WaitForIo(wants, deadline, "the request"));
  }
}

bool HttpConnection::WriteAll(absl::string_view bytes, absl::Duration stall) {
  pollfd stop = {stop_fd_, POLLIN, 0};
  if (poll(&stop, 1, 0) != 0) return false;
  size_t sent = 0;
  absl::Time deadline = absl::Now() + stall;
  while (sent < bytes.size()) {
    const size_t chunk = std::min<size_t>(bytes.size() - sent, INT_MAX);
    short wants = POLLOUT;
    if (tls_) {
      if (ssl_ == nullptr) return false;
      ERR_clear_error();
      const int rc = SSL_write(ssl_, bytes.data() + sent, static_cast<int>(chunk));
      if (rc > 0) {
        sent += rc;
        deadline = absl::Now() + stall;
        continue;
      }
      wants = SslWants(rc);
      if (wants == 0) return false;
    } else {
      const ssize_t n = send(fd_.get(), bytes.data() + sent, chunk, MSG_NOSIGNAL);
      if (n > 0) {
        sent += n;
        deadline = absl::Now() + stall;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    }
    if (WaitFor(wants, deadline) != Ready::kIo) return false;
  }
  return true;
}

bool HttpConnection::WaitIdle(absl::Duration timeout) {
  return WaitFor(POLLIN | POLLRDHUP, absl::Now() + timeout) == Ready::kTimeout;
}

void HttpConnection::DrainBeforeClose(absl::Duration timeout) {
  if (!tls_) shutdown(fd_.get(), SHUT_WR);
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t drained = 0; drained < (1 << 20);) {
    std::string dropped;
    absl::StatusOr<size_t> n = Read(dropped, 4096, deadline);
    if (!n.ok() || *n == 0) return;
    drained += *n;
  }
}

}  // namespace horovodd::daemon
