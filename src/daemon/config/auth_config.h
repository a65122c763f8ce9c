// The config keys of sections `auth` and `tls` (AuthSettings, TlsSettings)
// and the horovodd flags that override them. daemon_config.cc reads them
// like its other keys; horovodd_main.cc registers one flag per key.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/config/daemon_config.h"

namespace horovodd::daemon {

struct SecurityKey {
  const char* name;  // config key, dotted: "auth.admin_token_file"
  const char* flag;  // horovodd flag: "--admin-token-file"
  const char* help;  // for --help
  bool is_switch;    // the flag takes no value (it means true)
  // `origin` names where the value came from, for messages.
  std::function<absl::Status(const std::string& origin, const std::string& value,
                             DaemonConfig& config)>
      set;
};

const std::vector<SecurityKey>& SecurityKeys();

// Applies the flag `flag` (SecurityKey::flag) with `value`; relative paths
// are taken from the current directory. INVALID_ARGUMENT naming the flag.
absl::Status ApplySecurityFlag(const std::string& flag, const std::string& value,
                               DaemonConfig& config);

}  // namespace horovodd::daemon
