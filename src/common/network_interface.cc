#include "common/network_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace horovodd::internal {

absl::StatusOr<std::string> InterfaceIPv4Address(const std::string& name) {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot list the network interfaces: ", strerror(errno)));
  }
  std::string address;
  std::set<std::string> with_ipv4;
  for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    with_ipv4.insert(i->ifa_name);
    if (!address.empty() || name != i->ifa_name) continue;
    char text[INET_ADDRSTRLEN];
    const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &ipv4->sin_addr, text, sizeof text) != nullptr) address = text;
  }
  freeifaddrs(interfaces);
  if (address.empty()) {
    return absl::NotFoundError(
        absl::StrCat("network interface '", name,
                     "' (--network-interface) does not exist on this host or "
                     "has no IPv4 address; interfaces with one: ",
                     absl::StrJoin(with_ipv4, ", ")));
  }
  return address;
}

}  // namespace horovodd::internal
