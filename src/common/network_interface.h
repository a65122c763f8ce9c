// The address a worker binds its rings to when the job names a network
// interface (horovodrun --network-interface, passed to workers as
// HOROVODD_NETWORK_INTERFACE): that interface's IPv4 address on the worker's
// own host, which the daemon cannot know for a remote host.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace horovodd::internal {

// The first IPv4 address of interface `name` on this host ("lo" ->
// "127.0.0.1"). NOT_FOUND naming the interface, and the interfaces that do
// have one, when it does not exist or has no IPv4 address.
absl::StatusOr<std::string> InterfaceIPv4Address(const std::string& name);

}  // namespace horovodd::internal
