// Tokens and TLS settings without a server: random tokens, private token
// files (a file others may read is refused, naming it and its mode), the
// constant-time comparison, loopback detection, the auth/tls config keys and
// the listener's refusals.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "cli/client_credentials.h"
#include "common/loopback.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/auth/auth_token.h"
#include "daemon/auth/tls_credentials.h"
#include "daemon/config/daemon_config.h"

using namespace horovodd::daemon;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system's temp dir, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hvdd-auth-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

fs::path WriteFile(const fs::path& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("tokens are 256 random bits in hex, different every time") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto token = GenerateToken();
    REQUIRE(token.ok());
    CHECK(token->size() == 64);
    CHECK(token->find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(*token);
  }
  CHECK(seen.size() == 100);
}

TEST_CASE("token comparison: equal only when equal, an empty expected token matches nothing") {
  CHECK(TokensMatch("secret", "secret"));
  CHECK_FALSE(TokensMatch("secreT", "secret"));
  CHECK_FALSE(TokensMatch("secret-and-more", "secret"));
  CHECK_FALSE(TokensMatch("", "secret"));
  CHECK_FALSE(TokensMatch("", ""));
}

TEST_CASE("a token file others may read is refused, naming the file and its mode") {
  TempDir dir;
  const fs::path path = WriteFile(dir.path / "admin.token", "abc\n", 0644);
  auto token = ReadPrivateTokenFile(path.string(), "auth.admin_token_file");
  REQUIRE(token.status().code() == absl::StatusCode::kFailedPrecondition);
  const std::string message(token.status().message());
  CHECK_THAT(message, Catch::Contains(path.string()));
  CHECK_THAT(message, Catch::Contains("mode 0644"));
  CHECK_THAT(message, Catch::Contains("auth.admin_token_file"));
  CHECK_THAT(message, Catch::Contains("chmod 600"));

  REQUIRE(chmod(path.c_str(), 0600) == 0);
  auto fixed = ReadPrivateTokenFile(path.string(), "auth.admin_token_file");
  REQUIRE(fixed.ok());
  CHECK(*fixed == "abc");  // the newline is not part of it
}

TEST_CASE("empty and missing token files are refused by name") {
  TempDir dir;
  const fs::path empty = WriteFile(dir.path / "empty.token", " \n", 0600);
  CHECK(ReadPrivateTokenFile(empty.string(), "x").status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto missing = ReadPrivateTokenFile((dir.path / "nope").string(), "auth.viewer_token_file");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("auth.viewer_token_file"));
}

TEST_CASE("the admin token file is made private on first start and reused after") {
  TempDir dir;
  const fs::path path = dir.path / "admin.token";
  auto first = LoadOrCreateTokenFile(path.string());
  REQUIRE(first.ok());
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  auto again = LoadOrCreateTokenFile(path.string());
  REQUIRE(again.ok());
  CHECK(*again == *first);

  // Made readable by others meanwhile: refused, not silently reused.
  REQUIRE(chmod(path.c_str(), 0640) == 0);
  CHECK(LoadOrCreateTokenFile(path.string()).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("the access policy keeps the admin token in the state dir, or in memory without one") {
  TempDir dir;
  auto with_dir = AccessPolicy::Create(AuthSettings(), dir.path.string());
  REQUIRE(with_dir.ok());
  CHECK((*with_dir)->admin_token_path() == (dir.path / "admin.token").string());
  std::ifstream in(dir.path / "admin.token");
  std::string stored;
  in >> stored;
  CHECK(stored == (*with_dir)->admin_token());

  auto in_memory = AccessPolicy::Create(AuthSettings(), "");
  REQUIRE(in_memory.ok());
  CHECK((*in_memory)->admin_token_path().empty());
  CHECK((*in_memory)->admin_token().size() == 64);
}

TEST_CASE("loopback hosts and peers") {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "[::1]", "::1"}) {
    CHECK(IsLoopbackHost(host));
  }
  for (const char* host : {"0.0.0.0", "", "[::]", "10.0.0.1", "example.com", "128.0.0.1"}) {
    CHECK_FALSE(IsLoopbackHost(host));
  }
  CHECK(IsLoopbackPeer("ipv4:127.0.0.1:4000"));
  CHECK(IsLoopbackPeer("ipv6:[::1]:4000"));
  CHECK(IsLoopbackPeer("ipv6:[::ffff:127.0.0.1]:4000"));
  CHECK_FALSE(IsLoopbackPeer("ipv4:10.1.2.3:4000"));
  CHECK_FALSE(IsLoopbackPeer("ipv6:[fe80::1]:4000"));
}

TEST_CASE("a remote worker's tunnel is told from local callers by its port") {
  CHECK_FALSE(IsTunnelPeer("ipv4:127.0.0.1:41234"));
  AddTunnelPeerPort(41234);
  CHECK(IsTunnelPeer("ipv4:127.0.0.1:41234"));
  CHECK(IsTunnelPeer("ipv6:[::1]:41234"));
  CHECK_FALSE(IsTunnelPeer("ipv4:127.0.0.1:41235"));
  CHECK_FALSE(IsTunnelPeer("ipv4:10.0.0.1:41234"));  // not loopback: not ours
  CHECK_FALSE(IsTunnelPeer("unix:/run/horovodd.sock"));
  AddTunnelPeerPort(41234);  // a port reused while the first one closes
  RemoveTunnelPeerPort(41234);
  CHECK(IsTunnelPeer("ipv4:127.0.0.1:41234"));
  RemoveTunnelPeerPort(41234);
  CHECK_FALSE(IsTunnelPeer("ipv4:127.0.0.1:41234"));
}

TEST_CASE("plaintext beyond loopback is refused unless allow_insecure") {
  TlsSettings tls;
  auto refused = MakeServerCredentials(tls, "0.0.0.0");
  REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("tls.allow_insecure"));
  CHECK(MakeServerCredentials(tls, "127.0.0.1").ok());
  tls.allow_insecure = true;
  CHECK(MakeServerCredentials(tls, "0.0.0.0").ok());
}

TEST_CASE("inconsistent TLS settings are refused by name") {
  TlsSettings cert_only;
  cert_only.cert_file = "/x/cert.pem";
  CHECK_THAT(std::string(MakeServerCredentials(cert_only, "127.0.0.1").status().message()),
             Catch::Contains("tls.key_file"));
  TlsSettings mutual;
  mutual.cert_file = "/x/cert.pem";
  mutual.key_file = "/x/key.pem";
  mutual.client_ca_file = "/x/ca.pem";
  CHECK_THAT(std::string(MakeServerCredentials(mutual, "127.0.0.1").status().message()),
             Catch::Contains("tls.worker_cert_file"));
  mutual.worker_cert_file = "/x/w.pem";
  mutual.worker_key_file = "/x/w.key";
  auto unreadable = MakeServerCredentials(mutual, "127.0.0.1");
  CHECK(unreadable.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(unreadable.status().message()), Catch::Contains("tls.cert_file"));
}

TEST_CASE("workers are told how to reach a TLS daemon") {
  CHECK(WorkerTlsEnvironment(TlsSettings()).empty());
  TlsSettings tls;
  tls.cert_file = "/etc/horovodd/cert.pem";
  tls.key_file = "/etc/horovodd/key.pem";
  tls.client_ca_file = "/etc/horovodd/ca.pem";
  tls.worker_cert_file = "/etc/horovodd/worker.pem";
  tls.worker_key_file = "/etc/horovodd/worker.key";
  auto env = WorkerTlsEnvironment(tls);
  CHECK(env["HOROVODD_TLS"] == "1");
  CHECK(env["HOROVODD_TLS_CA"] == "/etc/horovodd/ca.pem");  // defaults to the client CA
  CHECK(env["HOROVODD_TLS_CERT"] == "/etc/horovodd/worker.pem");
  CHECK(env["HOROVODD_TLS_KEY"] == "/etc/horovodd/worker.key");
}

TEST_CASE("auth and tls config keys and flags") {
  TempDir dir;
  const fs::path config = dir.path / "horovodd.yaml";
  std::ofstream(config) << "auth:\n  admin_token_file: /etc/horovodd/admin.token\n"
                           "  open_read_only: loopback\n"
                           "tls:\n  cert_file: /etc/horovodd/cert.pem\n"
                           "  key_file: /etc/horovodd/key.pem\n  allow_insecure: true\n";
  auto loaded = LoadDaemonConfig(config.string());
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->auth.admin_token_file == "/etc/horovodd/admin.token");
  CHECK(loaded->auth.open_read_only == ReadOnlyAccess::kLoopback);
  CHECK(loaded->tls.cert_file == "/etc/horovodd/cert.pem");
  CHECK(loaded->tls.allow_insecure);

  std::ofstream(config) << "auth:\n  open_read_only: sometimes\n";
  auto bad = LoadDaemonConfig(config.string());
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("auth.open_read_only: 'sometimes' is not one of none, loopback, all"));
  std::ofstream(config) << "tls:\n  cert_file: relative.pem\n";
  CHECK_THAT(std::string(LoadDaemonConfig(config.string()).status().message()),
             Catch::Contains("tls.cert_file: 'relative.pem' is not an absolute path"));

  DaemonConfig from_flags;
  DaemonFlags flags;
  flags.security["--viewer-token-file"] = "viewer.token";
  flags.security["--open-read-only"] = "all";
  REQUIRE(ApplyDaemonFlags(flags, from_flags).ok());
  CHECK(fs::path(from_flags.auth.viewer_token_file).is_absolute());
  CHECK(from_flags.auth.open_read_only == ReadOnlyAccess::kAll);
}

TEST_CASE("refusals are logged at most once a second per reason, with the count left out") {
  horovodd::daemon::LogThrottle throttle(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  CHECK(throttle.Admit("wrong_token", t0) == std::optional<uint64_t>(0));
  for (int i = 1; i <= 99; ++i) {
    CHECK_FALSE(throttle.Admit("wrong_token", t0 + absl::Milliseconds(i)).has_value());
  }
  // Another reason has a line of its own.
  CHECK(throttle.Admit("missing_token", t0 + absl::Milliseconds(50)) == std::optional<uint64_t>(0));
  // A second later the next line says how many were left out.
  CHECK(throttle.Admit("wrong_token", t0 + absl::Seconds(1)) == std::optional<uint64_t>(99));
  CHECK(throttle.Admit("wrong_token", t0 + absl::Seconds(3)) == std::optional<uint64_t>(0));
}

TEST_CASE("the same rules for any caller: tokens, open reads, and what a caller is granted") {
  TempDir dir;
  AuthSettings settings;
  settings.admin_token_file = WriteFile(dir.path / "admin.token", "admin-secret\n", 0600).string();
  settings.viewer_token_file =
      WriteFile(dir.path / "viewer.token", "viewer-secret\n", 0600).string();
  auto policy = AccessPolicy::Create(settings, "");
  REQUIRE(policy.ok());
  AccessPolicy& access = **policy;
  const std::string local = "ipv4:127.0.0.1:5000";
  const Caller nobody{local, std::nullopt};
  const Caller viewer{local, "Bearer viewer-secret"};
  const Caller admin{local, "Bearer admin-secret"};
  const Caller stranger{local, "Bearer guess"};

  CHECK(access.Authorize(nobody, "page", Access::kRead).code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(access.Authorize(Caller{local, "Basic x"}, "page", Access::kRead).code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(access.Authorize(stranger, "page", Access::kRead).code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(access.Authorize(viewer, "page", Access::kRead).ok());
  const absl::Status viewer_acts = access.Authorize(viewer, "page cancel", Access::kAdmin);
  CHECK(viewer_acts.code() == absl::StatusCode::kPermissionDenied);
  CHECK(viewer_acts.message() ==
        "the viewer token may only read; page cancel needs the admin token");
  CHECK(access.Authorize(admin, "page cancel", Access::kAdmin).ok());

  CHECK(access.Grants(nobody) == std::nullopt);
  CHECK(access.Grants(stranger) == std::nullopt);
  CHECK(access.Grants(viewer) == Access::kRead);
  CHECK(access.Grants(admin) == Access::kAdmin);
  CHECK(*access.CheckToken(viewer, "login") == Access::kRead);
  CHECK(*access.CheckToken(admin, "login") == Access::kAdmin);
  CHECK(access.CheckToken(stranger, "login").status().code() == absl::StatusCode::kUnauthenticated);

  // Each refusal counts by its reason, as gRPC's do.
  const std::string counts = access.RenderMetrics();
  CHECK(absl::StrContains(counts, "horovodd_auth_failures_total{reason=\"missing_token\"} 1"));
  CHECK(absl::StrContains(counts, "horovodd_auth_failures_total{reason=\"malformed_token\"} 1"));
  CHECK(absl::StrContains(counts, "horovodd_auth_failures_total{reason=\"wrong_token\"} 2"));
  CHECK(absl::StrContains(counts,
                          "horovodd_auth_failures_total{reason=\"viewer_token_on_admin_call\"} 1"));
}

TEST_CASE("open_read_only opens reads to loopback callers, never actions, and not a login") {
  AuthSettings settings;
  settings.open_read_only = ReadOnlyAccess::kLoopback;
  auto policy = AccessPolicy::Create(settings, "");
  REQUIRE(policy.ok());
  AccessPolicy& access = **policy;
  const Caller local{"ipv4:127.0.0.1:5000", std::nullopt};
  const Caller remote{"ipv4:10.1.2.3:5000", std::nullopt};
  CHECK(access.Authorize(local, "page", Access::kRead).ok());
  CHECK(access.Grants(local) == Access::kRead);
  CHECK(access.Authorize(local, "page cancel", Access::kAdmin).code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(access.Authorize(remote, "page", Access::kRead).code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(access.Grants(remote) == std::nullopt);
  // A login proves a token; the open rule proves none.
  CHECK(access.CheckToken(local, "login").status().code() == absl::StatusCode::kUnauthenticated);
}

TEST_CASE("without a viewer token file, only a daemon with no state dir keeps one, in memory") {
  TempDir dir;
  auto embedded = AccessPolicy::Create(AuthSettings(), "");
  REQUIRE(embedded.ok());
  CHECK((*embedded)->viewer_token().size() == 64);
  CHECK((*embedded)->viewer_token() != (*embedded)->admin_token());
  CHECK((*embedded)->Grants(Caller{"ipv4:10.0.0.1:1", "Bearer " + (*embedded)->viewer_token()}) ==
        Access::kRead);
  auto standalone = AccessPolicy::Create(AuthSettings(), dir.path.string());
  REQUIRE(standalone.ok());
  CHECK((*standalone)->viewer_token().empty());
}

TEST_CASE("a client's empty or missing TLS and token files are refused by flag and path") {
  TempDir dir;
  const fs::path empty = WriteFile(dir.path / "ca.pem", "", 0644);
  horovodd::cli::ClientSecurity security;
  security.tls_ca = empty.string();
  auto credentials = horovodd::cli::ResolveChannelCredentials(security);
  CHECK(credentials.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(credentials.status().message()) == "--tls-ca: " + empty.string() + " is empty");
  security.tls_ca = (dir.path / "nope.pem").string();
  credentials = horovodd::cli::ResolveChannelCredentials(security);
  CHECK(credentials.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(credentials.status().message()),
             Catch::StartsWith("--tls-ca: cannot read " + security.tls_ca + ": "));

  horovodd::cli::ClientSecurity token;
  token.token_file = WriteFile(dir.path / "empty.token", "\n", 0600).string();
  CHECK(horovodd::cli::ResolveToken(token).status().code() == absl::StatusCode::kInvalidArgument);
  token.token_file = (dir.path / "nope.token").string();
  auto missing = horovodd::cli::ResolveToken(token);
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::StartsWith("--token-file: cannot read " + token.token_file + ": "));
}
