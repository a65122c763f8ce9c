// "host:port" addresses as operators write them (--listen, --metrics-listen,
// the config file, a daemon address handed to remote workers): one parser, so
// every place accepts and refuses the same shapes with the same words.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace horovodd::daemon {

struct HostPort {
  std::string host;  // as written, IPv6 in brackets: "127.0.0.1", "[::1]", "head-0"
  int port = 0;      // 0 to 65535; 0 asks the kernel for a free one

  // The host without IPv6 brackets, for getaddrinfo and inet_pton.
  std::string BareHost() const;
};

// Splits "host:port" or "[v6]:port". Errors are INVALID_ARGUMENT and read
// "'ADDRESS' is not host:port (...)" or "'ADDRESS' has no port between 0 and
// 65535", for the caller to prefix with where the address came from.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

}  // namespace horovodd::daemon
