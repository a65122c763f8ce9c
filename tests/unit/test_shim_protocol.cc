// The shim protocol's unix sockets: a shim listening under a state dir deeper than sun_path's
// 107 bytes is still reachable, and a name that can never fit is refused with a clear error.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "catch2/catch.hpp"
#include "daemon/shim_protocol/shim_protocol.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using horovodd::shim::CheckSocketPath;
using horovodd::shim::ConnectUnix;
using horovodd::shim::ListenUnix;

using hvdd_test::TempDir;

TEST_CASE("a shim socket under a state dir longer than sun_path is reachable") {
  TempDir temp("hvdd-shim-proto");
  fs::path dir = temp.path();
  while (dir.string().size() < 150) dir /= "a-deep-state-directory";
  fs::create_directories(dir);
  const std::string path = (dir / "job-0000000001.sock").string();
  REQUIRE(path.size() > 107);

  REQUIRE(CheckSocketPath(path).ok());
  absl::StatusOr<int> listener = ListenUnix(path);
  REQUIRE(listener.ok());
  CHECK(fs::is_socket(path));  // made at the full path, not under /proc

  absl::StatusOr<int> client = ConnectUnix(path);
  REQUIRE(client.ok());
  const int accepted = accept(*listener, nullptr, nullptr);
  CHECK(accepted >= 0);
  const char ping = 'p';
  REQUIRE(write(*client, &ping, 1) == 1);
  char got = 0;
  REQUIRE(read(accepted, &got, 1) == 1);
  CHECK(got == 'p');
  close(accepted);
  close(*client);
  close(*listener);
}

TEST_CASE("a shim socket path that cannot fit says which name is too long") {
  TempDir temp("hvdd-shim-proto");
  const std::string name(120, 'j');
  const absl::Status status = CheckSocketPath((temp.path() / name).string());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains(name) && Catch::Contains("too long"));

  CHECK(CheckSocketPath("").code() == absl::StatusCode::kInvalidArgument);
  CHECK(CheckSocketPath("/no/such/dir/" + std::string(110, 'x') + "/job.sock").code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("connecting where no shim listens is UNAVAILABLE naming the path") {
  TempDir temp("hvdd-shim-proto");
  const std::string path = (temp.path() / "nobody.sock").string();
  absl::StatusOr<int> client = ConnectUnix(path);
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(client.status().message()), Catch::Contains(path));
}
