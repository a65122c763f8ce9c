#include "common/host_port.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

bool Bracketed(absl::string_view host) {
  return host.size() >= 2 && host.front() == '[' && host.back() == ']';
}

absl::Status Bad(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", address, "' ", why));
}

}  // namespace

std::string HostPort::BareHost() const {
  return Bracketed(host) ? host.substr(1, host.size() - 2) : host;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Bad(address, "is not host:port (e.g. 127.0.0.1:7451)");
  }
  const absl::string_view host = address.substr(0, colon);
  // "::1:7451" would be read as host "::1" by one tool and "::" by another.
  if (host.find(':') != absl::string_view::npos && !Bracketed(host)) {
    return Bad(address, "is not host:port (an IPv6 host goes in brackets: [::1]:7451)");
  }
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return Bad(address, "has no port between 0 and 65535");
  }
  return HostPort{std::string(host), port};
}

}  // namespace horovodd::daemon
