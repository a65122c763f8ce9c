#include "daemon/config/auth_config.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

absl::Status Bad(const std::string& origin, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": '", value, "' ", why));
}

// A file the daemon reads; absolute, since a service starts in /. Empty: unset.
auto PathSetter(std::string AuthSettings::*auth_field, std::string TlsSettings::*tls_field) {
  return [auth_field, tls_field](const std::string& origin, const std::string& value,
                                 DaemonConfig& config) -> absl::Status {
    if (!value.empty() && value.front() != '/') {
      return Bad(origin, value, "is not an absolute path");
    }
    if (auth_field != nullptr) config.auth.*auth_field = value;
    if (tls_field != nullptr) config.tls.*tls_field = value;
    return absl::OkStatus();
  };
}

absl::Status SetOpenReadOnly(const std::string& origin, const std::string& value,
                             DaemonConfig& config) {
  if (value == "none") {
    config.auth.open_read_only = ReadOnlyAccess::kTokenRequired;
  } else if (value == "loopback") {
    config.auth.open_read_only = ReadOnlyAccess::kLoopback;
  } else if (value == "all") {
    config.auth.open_read_only = ReadOnlyAccess::kAll;
  } else {
    return Bad(origin, value, "is not one of none, loopback, all");
  }
  return absl::OkStatus();
}

absl::Status SetAllowInsecure(const std::string& origin, const std::string& value,
                              DaemonConfig& config) {
  if (value == "true") {
    config.tls.allow_insecure = true;
  } else if (value == "false") {
    config.tls.allow_insecure = false;
  } else {
    return Bad(origin, value, "is not true or false");
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<SecurityKey>& SecurityKeys() {
  using A = AuthSettings;
  using T = TlsSettings;
  static const std::vector<SecurityKey> keys = {
      {"auth.admin_token_file", "--admin-token-file",
       "file with the admin token, mode 0600 [<state dir>/admin.token, made on first start]", false,
       PathSetter(&A::admin_token_file, nullptr)},
      {"auth.viewer_token_file", "--viewer-token-file",
       "file with a token for the read-only calls, mode 0600 [none]", false,
       PathSetter(&A::viewer_token_file, nullptr)},
      {"auth.open_read_only", "--open-read-only",
       "read-only calls without a token: none, loopback or all [none]", false, SetOpenReadOnly},
      {"tls.cert_file", "--tls-cert-file", "the daemon's TLS certificate chain (PEM) [none]", false,
       PathSetter(nullptr, &T::cert_file)},
      {"tls.key_file", "--tls-key-file", "the daemon's TLS private key (PEM) [none]", false,
       PathSetter(nullptr, &T::key_file)},
      {"tls.client_ca_file", "--tls-client-ca-file",
       "CA that client certificates must be signed by (mutual TLS) [none]", false,
       PathSetter(nullptr, &T::client_ca_file)},
      {"tls.worker_ca_file", "--tls-worker-ca-file",
       "CA workers verify the daemon with [tls.client_ca_file]", false,
       PathSetter(nullptr, &T::worker_ca_file)},
      {"tls.worker_cert_file", "--tls-worker-cert-file",
       "certificate workers present under mutual TLS [none]", false,
       PathSetter(nullptr, &T::worker_cert_file)},
      {"tls.worker_key_file", "--tls-worker-key-file", "private key of tls.worker_cert_file [none]",
       false, PathSetter(nullptr, &T::worker_key_file)},
      {"tls.allow_insecure", "--tls-allow-insecure",
       "allow listening beyond loopback without TLS (logs a warning)", true, SetAllowInsecure},
  };
  return keys;
}

absl::Status ApplySecurityFlag(const std::string& flag, const std::string& value,
                               DaemonConfig& config) {
  for (const SecurityKey& key : SecurityKeys()) {
    if (flag != key.flag) continue;
    std::string text = value;
    const bool is_path = absl::string_view(key.name).find("_file") != absl::string_view::npos;
    if (is_path && !text.empty()) {
      std::error_code error;
      auto absolute = std::filesystem::absolute(text, error);
      if (!error) text = absolute.lexically_normal().string();
    }
    return key.set(flag, text, config);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
}

}  // namespace horovodd::daemon
