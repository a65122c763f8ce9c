// host:port as every address flag and config key takes it (src/common/host_port.h).
#include <string>

#include <catch2/catch.hpp>

#include "common/host_port.h"

namespace horovodd::daemon {
namespace {

TEST_CASE("host:port splits into a host and a port, IPv6 in brackets") {
  struct Case {
    const char* address;
    const char* host;
    const char* bare_host;
    int port;
  };
  for (const Case& c : {Case{"127.0.0.1:7451", "127.0.0.1", "127.0.0.1", 7451},
                        Case{"head-0.cluster:0", "head-0.cluster", "head-0.cluster", 0},
                        Case{"[::1]:65535", "[::1]", "::1", 65535},
                        Case{"[fe80::1%eth0]:80", "[fe80::1%eth0]", "fe80::1%eth0", 80}}) {
    INFO(c.address);
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address);
    REQUIRE(parsed.ok());
    CHECK(parsed->host == c.host);
    CHECK(parsed->BareHost() == c.bare_host);
    CHECK(parsed->port == c.port);
  }
}

TEST_CASE("a malformed address is refused with what is wrong with it") {
  struct Case {
    const char* address;
    const char* error;
  };
  for (const Case& c :
       {Case{"7451", "'7451' is not host:port (e.g. 127.0.0.1:7451)"},
        Case{":7451", "':7451' is not host:port (e.g. 127.0.0.1:7451)"},
        Case{"::1:7451", "'::1:7451' is not host:port (an IPv6 host goes in brackets"},
        Case{"127.0.0.1:", "'127.0.0.1:' has no port between 0 and 65535"},
        Case{"127.0.0.1:http", "'127.0.0.1:http' has no port between 0 and 65535"},
        Case{"127.0.0.1:65536", "'127.0.0.1:65536' has no port between 0 and 65535"},
        Case{"127.0.0.1:-1", "'127.0.0.1:-1' has no port between 0 and 65535"}}) {
    INFO(c.address);
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address);
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(parsed.status().message()), Catch::StartsWith(c.error));
  }
}

}  // namespace
}  // namespace horovodd::daemon
