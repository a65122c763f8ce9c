#include "daemon/auth/tls_credentials.h"

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/loopback.h"
#include "common/status_macros.h"

namespace horovodd::daemon {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsSettings& settings, absl::string_view host) {
  if (settings.cert_file.empty() != settings.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.cert_file and tls.key_file go together: set both (TLS) or neither");
  }
  if (!settings.enabled()) {
    if (!settings.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "tls.client_ca_file needs tls.cert_file and tls.key_file (mutual TLS is TLS)");
    }
    if (!IsLoopbackHost(host) && !settings.allow_insecure) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to listen on '", host,
          "' without TLS: anyone who can reach it could read tokens off the wire; set "
          "tls.cert_file and tls.key_file, or tls.allow_insecure: true on a network you trust"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (!settings.client_ca_file.empty() &&
      (settings.worker_cert_file.empty() || settings.worker_key_file.empty())) {
    return absl::InvalidArgumentError(
        "tls.client_ca_file (mutual TLS) needs tls.worker_cert_file and tls.worker_key_file: "
        "the certificate the daemon's workers present to it");
  }
  HVDD_ASSIGN_OR_RETURN(auto cert, ReadPemFile(settings.cert_file, "tls.cert_file"));
  HVDD_ASSIGN_OR_RETURN(auto key, ReadPemFile(settings.key_file, "tls.key_file"));
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!settings.client_ca_file.empty()) {
    HVDD_ASSIGN_OR_RETURN(auto ca, ReadPemFile(settings.client_ca_file, "tls.client_ca_file"));
    options.pem_root_certs = ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

std::map<std::string, std::string> WorkerTlsEnvironment(const TlsSettings& settings) {
  std::map<std::string, std::string> env;
  if (!settings.enabled()) return env;
  env["HOROVODD_TLS"] = "1";
  const std::string& ca =
      settings.worker_ca_file.empty() ? settings.client_ca_file : settings.worker_ca_file;
  if (!ca.empty()) env["HOROVODD_TLS_CA"] = ca;
  if (!settings.worker_cert_file.empty()) env["HOROVODD_TLS_CERT"] = settings.worker_cert_file;
  if (!settings.worker_key_file.empty()) env["HOROVODD_TLS_KEY"] = settings.worker_key_file;
  return env;
}

}  // namespace horovodd::daemon
