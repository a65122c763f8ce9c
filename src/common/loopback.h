// What counts as this machine's loopback: for listen addresses (plaintext is
// allowed there without TLS), for callers (`auth.open_read_only: loopback`),
// and for a daemon address a remote host cannot dial (daemon_tunnel.h).
//
// A remote worker's DaemonTunnel connects to the daemon from 127.0.0.1 too,
// so its connections are registered here: the access policy must not count
// them as local, since `open_read_only: loopback` opens read calls to the
// users of the daemon's host, not to every user of every host a tunnel
// reaches.
#pragma once

#include "absl/strings/string_view.h"

namespace horovodd::daemon {

// Whether `host` (brackets allowed) is a loopback one: 127.0.0.0/8, ::1,
// "localhost".
bool IsLoopbackHost(absl::string_view host);

// Whether a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000",
// "unix:...") connected over loopback.
bool IsLoopbackPeer(absl::string_view peer);

// The local port of a tunnel's connection to the daemon, from before its
// first byte is passed on until it is closed.
void AddTunnelPeerPort(int local_port);
void RemoveTunnelPeerPort(int local_port);
// Whether a loopback gRPC peer is one of those connections.
bool IsTunnelPeer(absl::string_view peer);

}  // namespace horovodd::daemon
