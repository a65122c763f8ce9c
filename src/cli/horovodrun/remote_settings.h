// horovodrun's settings for hosts that are not this machine: how the daemon reaches them over
// SSH (--ssh-port, --ssh-user, --ssh-identity-file, --ssh-known-hosts,
// --ssh-host-key-checking) and which interfaces workers use (--network-interface and
// --network-interfaces: repeated or comma-separated, Horovod's forms). Read from the command
// line and --config-file alike.
#pragma once

#include "absl/status/status.h"
#include "cli/horovodrun/config_file.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

// Fills spec->ssh() (with the defaults: port 22, the current user, accept-new),
// spec->network_interfaces() (each name once, in order) and spec->network_interface() (the
// first, which rings bind to). Paths become absolute; the identity file must be a readable
// file, and so must the known hosts file under strict checking. INVALID_ARGUMENT naming the
// setting and its value otherwise.
absl::Status ReadRemoteSettings(const RawSettings& settings, v1::JobSpec* spec);

}  // namespace horovodd::cli
