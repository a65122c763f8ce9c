// How horovodrun (with --daemon) and horovodctl prove who they are to
// horovodd and reach it: the admin or viewer token, sent on every call as
// `authorization: Bearer TOKEN`, and TLS (with a client certificate for
// mutual TLS). Shared by both CLIs so they find credentials the same way.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace horovodd::cli {

// Where the daemon keeps the admin token it made (horovodd's default state dir).
inline constexpr char kDefaultAdminTokenFile[] = "/var/lib/horovodd/admin.token";

// What the command line said; empty fields fall back to the environment.
struct ClientSecurity {
  std::string token_file;  // --token-file
  std::string tls_ca;      // --tls-ca: CA that signed the daemon's certificate
  std::string tls_cert;    // --tls-cert: client certificate (mutual TLS)
  std::string tls_key;     // --tls-key: its private key
};

// The token: --token-file, else $HOROVODD_TOKEN, else $HOROVODD_TOKEN_FILE,
// else kDefaultAdminTokenFile when this user can read it; "" when none.
// NOT_FOUND naming the flag or variable when a named file cannot be read;
// INVALID_ARGUMENT when it is empty.
absl::StatusOr<std::string> ResolveToken(const ClientSecurity& security);

// TLS when any of --tls-ca/--tls-cert/--tls-key or $HOROVODD_TLS_CA/_CERT/_KEY
// is set (or $HOROVODD_TLS=1: TLS with the system's roots); plaintext
// otherwise. A certificate needs its key. NOT_FOUND naming an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ResolveChannelCredentials(
    const ClientSecurity& security);

// A channel to `address` whose every call carries `token` (none when empty).
std::shared_ptr<grpc::Channel> CreateDaemonChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token);

// The three above: a channel with this client's token and TLS.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectToDaemon(const std::string& address,
                                                               const ClientSecurity& security);

}  // namespace horovodd::cli
