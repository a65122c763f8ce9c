// How the daemon's gRPC listener is secured (TlsSettings, config section
// `tls`): TLS, optionally mutual, or plaintext on loopback. Also what the
// daemon tells its workers so they reach it the same way.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/pem_file.h"
#include "daemon/config/auth_settings.h"

namespace grpc {
class ServerCredentials;
}

namespace horovodd::daemon {

// Credentials for a listener on `host`: TLS when settings.enabled() (asking
// for a client certificate signed by client_ca_file when that is set);
// plaintext otherwise, which beyond loopback needs allow_insecure.
// INVALID_ARGUMENT for inconsistent settings or plaintext beyond loopback,
// NOT_FOUND for a PEM file that cannot be read (naming its setting).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsSettings& settings, absl::string_view host);

// HOROVODD_TLS (1 under TLS) and HOROVODD_TLS_CA / _CERT / _KEY (paths) for
// every worker; empty without TLS.
std::map<std::string, std::string> WorkerTlsEnvironment(const TlsSettings& settings);

// ReadPemFile (common/pem_file.h) reads the files these name.
using ::horovodd::ReadPemFile;

}  // namespace horovodd::daemon
