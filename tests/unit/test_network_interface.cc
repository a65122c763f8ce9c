// The worker's --network-interface lookup against this host's interfaces.
#include <catch2/catch.hpp>
#include <string>

#include "common/network_interface.h"

namespace horovodd::internal {
namespace {

TEST_CASE("an interface's IPv4 address is found by its name", "[ssh]") {
  absl::StatusOr<std::string> loopback = InterfaceIPv4Address("lo");
  REQUIRE(loopback.ok());
  CHECK(*loopback == "127.0.0.1");
}

TEST_CASE("an unknown interface is named, with the ones that exist", "[ssh]") {
  absl::StatusOr<std::string> missing = InterfaceIPv4Address("nosuch9");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  const std::string message(missing.status().message());
  CHECK_THAT(message, Catch::Contains("'nosuch9'"));
  CHECK_THAT(message, Catch::Contains("lo"));
}

}  // namespace
}  // namespace horovodd::internal
