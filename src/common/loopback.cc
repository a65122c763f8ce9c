#include "common/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {
namespace {

ABSL_CONST_INIT absl::Mutex tunnel_mu(absl::kConstInit);

// Port -> open tunnel connections on it (counted, so that a close never
// forgets a port registered twice). Never destroyed: used until exit.
std::unordered_map<int, int>& TunnelPorts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tunnel_mu) {
  static auto* ports = new std::unordered_map<int, int>();
  return *ports;
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // a name, "", 0.0.0.0, ::: reachable from elsewhere
}

bool IsLoopbackPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:")) return true;
  if (absl::StartsWith(peer, "ipv4:127.")) return true;
  if (absl::StartsWith(peer, "ipv6:[::1]")) return true;
  // An IPv4 client of a dual-stack listener.
  return absl::StartsWith(peer, "ipv6:[::ffff:127.");
}

void AddTunnelPeerPort(int local_port) {
  absl::MutexLock lock(&tunnel_mu);
  ++TunnelPorts()[local_port];
}

void RemoveTunnelPeerPort(int local_port) {
  absl::MutexLock lock(&tunnel_mu);
  auto it = TunnelPorts().find(local_port);
  if (it != TunnelPorts().end() && --it->second == 0) TunnelPorts().erase(it);
}

bool IsTunnelPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || !IsLoopbackPeer(peer)) return false;
  const size_t colon = peer.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(peer.substr(colon + 1), &port)) {
    return false;
  }
  absl::MutexLock lock(&tunnel_mu);
  return TunnelPorts().count(port) != 0;
}

}  // namespace horovodd::daemon
