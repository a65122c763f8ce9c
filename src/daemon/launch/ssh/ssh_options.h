// How to reach a remote host (horovodrun's --ssh-* flags): a job's options
// for the SSH launcher, and for the shim launcher's shims on remote hosts.
#pragma once

#include <string>

#include "daemon/launch/launcher.h"

namespace horovodd::daemon {

struct SshOptions final : RouteOptions {
  int port = 22;
  std::string user;              // empty: the daemon's user
  std::string identity_file;     // empty: libssh's defaults (~/.ssh/id_*)
  std::string known_hosts_file;  // empty: ~/.ssh/known_hosts
  enum class HostKeyChecking { kStrict, kAcceptNew, kOff };
  HostKeyChecking host_key_checking = HostKeyChecking::kAcceptNew;
};

// The SSH options `route` carries; the defaults when it carries none.
inline const SshOptions& SshOptionsIn(const JobRoute& route) {
  static const SshOptions kDefaults;
  const SshOptions* options = route.options_as<SshOptions>();
  return options != nullptr ? *options : kDefaults;
}

}  // namespace horovodd::daemon
