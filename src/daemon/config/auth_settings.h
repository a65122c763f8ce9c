// Who may call horovodd (config section `auth`, documented in
// config/horovodd.yaml) and how its gRPC listener is secured (section `tls`).
// Plain structs: daemon_config.cc fills them, DaemonServer acts on them.
#pragma once

#include <string>

namespace horovodd::daemon {

// Who may make the read-only JobService calls (GetJob, ListJobs, WatchJob,
// GetWorkerOutput) without a token.
enum class ReadOnlyAccess {
  kTokenRequired,  // "none": the viewer or admin token is needed
  kLoopback,       // "loopback": anyone connecting from 127.0.0.0/8 or ::1
  kAll,            // "all": anyone who can connect
};

struct AuthSettings {
  // File holding the admin token (submit, cancel, drain, undrain, and all the
  // read-only calls). Empty: <state_dir>/admin.token, generated on first start
  // (or, with no state dir, a token kept in memory). Must be private (0600).
  std::string admin_token_file;
  // File holding a token for the read-only calls only; empty: none.
  std::string viewer_token_file;
  ReadOnlyAccess open_read_only = ReadOnlyAccess::kTokenRequired;
};

struct TlsSettings {
  // The daemon's certificate chain and private key (PEM); both or neither.
  // Set: the gRPC listener speaks TLS only.
  std::string cert_file;
  std::string key_file;
  // Set: every client (CLIs and workers) must present a certificate signed by
  // one of these CAs (mutual TLS).
  std::string client_ca_file;
  // What the daemon tells its workers (HOROVODD_TLS_CA/_CERT/_KEY): the CA
  // they verify the daemon with (default: client_ca_file, else the system's
  // roots), and the certificate and key they present under mutual TLS.
  // Paths as seen on the workers' hosts.
  std::string worker_ca_file;
  std::string worker_cert_file;
  std::string worker_key_file;
  // Listening beyond loopback without TLS is refused unless this is true.
  bool allow_insecure = false;

  bool enabled() const { return !cert_file.empty(); }
};

}  // namespace horovodd::daemon
