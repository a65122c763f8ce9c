// horovodd's config file and flags: defaults, the shipped config/horovodd.yaml,
// flags over keys, and errors that name the file, line, key and value.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "daemon/config/daemon_config.h"

using horovodd::daemon::ApplyDaemonFlags;
using horovodd::daemon::DaemonConfig;
using horovodd::daemon::DaemonFlags;
using horovodd::daemon::LoadDaemonConfig;
using horovodd::daemon::LogFormat;

namespace {

// A config file in a fresh temp dir, removed with the object.
class TempConfig {
 public:
  explicit TempConfig(const std::string& text) {
    char pattern[] = "/tmp/hvdd-config-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    path_ = dir_ + "/horovodd.yaml";
    std::ofstream(path_) << text;
  }
  ~TempConfig() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

// The error from loading `file`; fails the test if it loads.
std::string LoadError(const TempConfig& file) {
  auto loaded = LoadDaemonConfig(file.path());
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(loaded.status().message());
}

void CheckDefaults(const DaemonConfig& c) {
  CHECK(c.listen == "127.0.0.1:7451");
  CHECK(c.state_dir == "/var/lib/horovodd");
  CHECK(c.metrics_listen == "127.0.0.1:9464");
  CHECK(c.log_level == "info");
  CHECK(c.log_format == LogFormat::kText);
  CHECK(c.limits.max_jobs == 100);
  CHECK(c.limits.max_workers_per_job == 1024);
}

TEST_CASE("the shutdown policy, the workers' grace and the shim are keys") {
  TempConfig file(
      "shutdown:\n  stop_jobs: true\nworker:\n  daemon_grace: 90s\n"
      "shim:\n  binary: /opt/horovodd/bin/horovodd-shim\n");
  auto config = LoadDaemonConfig(file.path());
  REQUIRE(config.ok());
  CHECK(config->stop_jobs_on_shutdown);
  CHECK(config->worker_daemon_grace == absl::Seconds(90));
  CHECK(config->shim_binary == "/opt/horovodd/bin/horovodd-shim");
  const DaemonConfig defaults;
  CHECK_FALSE(defaults.stop_jobs_on_shutdown);  // SIGTERM leaves jobs running
  CHECK(defaults.worker_daemon_grace == absl::Minutes(10));

  TempConfig bad("worker:\n  daemon_grace: soon\n");
  CHECK(absl::StrContains(LoadError(bad), "worker.daemon_grace: 'soon' is not a duration"));
  TempConfig bad_bool("shutdown:\n  stop_jobs: maybe\n");
  CHECK(absl::StrContains(LoadError(bad_bool), "'maybe' is not true or false"));
}

}  // namespace

TEST_CASE("no config file and no flags means the documented defaults") {
  DaemonConfig config;
  REQUIRE(ApplyDaemonFlags(DaemonFlags{}, config).ok());
  CheckDefaults(config);
}

TEST_CASE("an empty config file keeps every default") {
  TempConfig file("# nothing set\n");
  auto loaded = LoadDaemonConfig(file.path());
  REQUIRE(loaded.ok());
  CheckDefaults(*loaded);
}

TEST_CASE("the shipped config/horovodd.yaml loads and states exactly the defaults") {
  auto loaded = LoadDaemonConfig(std::string(HVDD_SOURCE_DIR) + "/config/horovodd.yaml");
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CheckDefaults(*loaded);
}

TEST_CASE("every key is read from the file") {
  TempConfig file(
      "listen: 0.0.0.0:8000\n"
      "state_dir: /srv/horovodd\n"
      "metrics_listen: '[::1]:9100'\n"
      "log_level: debug\n"
      "log_format: json\n"
      "limits:\n"
      "  max_jobs: 7\n"
      "  max_workers_per_job: 64\n");
  auto loaded = LoadDaemonConfig(file.path());
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->listen == "0.0.0.0:8000");
  CHECK(loaded->state_dir == "/srv/horovodd");
  CHECK(loaded->metrics_listen == "[::1]:9100");
  CHECK(loaded->log_level == "debug");
  CHECK(loaded->log_format == LogFormat::kJson);
  CHECK(loaded->limits.max_jobs == 7);
  CHECK(loaded->limits.max_workers_per_job == 64);
}

TEST_CASE("a section may set only some of its keys") {
  TempConfig file("limits:\n  max_jobs: 3\n");
  auto loaded = LoadDaemonConfig(file.path());
  REQUIRE(loaded.ok());
  CHECK(loaded->limits.max_jobs == 3);
  CHECK(loaded->limits.max_workers_per_job == 1024);
}

TEST_CASE("an empty metrics_listen or state_dir turns them off") {
  TempConfig file("metrics_listen: \"\"\nstate_dir:\n");
  auto loaded = LoadDaemonConfig(file.path());
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->metrics_listen.empty());
  CHECK(loaded->state_dir.empty());
}

TEST_CASE("flags override the keys they name and leave the others") {
  TempConfig file("listen: 127.0.0.1:8000\nlog_level: debug\nlimits:\n  max_jobs: 5\n");
  auto loaded = LoadDaemonConfig(file.path());
  REQUIRE(loaded.ok());
  DaemonFlags flags;
  flags.listen = "127.0.0.1:0";
  flags.metrics_listen = "";
  flags.log_format = "json";
  REQUIRE(ApplyDaemonFlags(flags, *loaded).ok());
  CHECK(loaded->listen == "127.0.0.1:0");
  CHECK(loaded->metrics_listen.empty());
  CHECK(loaded->log_format == LogFormat::kJson);
  CHECK(loaded->log_level == "debug");
  CHECK(loaded->limits.max_jobs == 5);
}

TEST_CASE("a relative --state-dir means one under the current directory") {
  DaemonConfig config;
  DaemonFlags flags;
  flags.state_dir = "records";
  REQUIRE(ApplyDaemonFlags(flags, config).ok());
  CHECK(config.state_dir == (std::filesystem::current_path() / "records").string());
}

TEST_CASE("the store is SQLite by default, or an etcd cluster from the file or --store") {
  CHECK(DaemonConfig().store.empty());
  CHECK(DaemonConfig().etcd.prefix == "/horovodd/");
  CHECK(DaemonConfig().etcd.lease_ttl == absl::Seconds(5));
  TempConfig file(
      "store: etcd://10.0.0.1:2379,10.0.0.2:2379\n"
      "etcd:\n"
      "  prefix: /team-a/\n"
      "  lease_ttl: 3s\n"
      "  advertise: head-1:7451\n"
      "  ca_file: /etc/etcd/ca.pem\n"
      "  cert_file: /etc/etcd/client.pem\n"
      "  key_file: /etc/etcd/client.key\n");
  auto loaded = LoadDaemonConfig(file.path());
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->store == "etcd://10.0.0.1:2379,10.0.0.2:2379");
  CHECK(loaded->etcd.prefix == "/team-a/");
  CHECK(loaded->etcd.lease_ttl == absl::Seconds(3));
  CHECK(loaded->etcd.advertise == "head-1:7451");
  CHECK(loaded->etcd.ca_file == "/etc/etcd/ca.pem");
  CHECK(loaded->etcd.cert_file == "/etc/etcd/client.pem");
  CHECK(loaded->etcd.key_file == "/etc/etcd/client.key");

  DaemonFlags flags;
  flags.store = "etcd://h1:2379,h2:2379,h3:2379";
  REQUIRE(ApplyDaemonFlags(flags, *loaded).ok());
  CHECK(loaded->store == "etcd://h1:2379,h2:2379,h3:2379");

  TempConfig bad_store("store: mysql://db:3306\n");
  CHECK(absl::StrContains(LoadError(bad_store), "store: 'mysql://db:3306' is not"));
  TempConfig bad_endpoint("store: etcd://h1:2379,h2\n");
  CHECK(absl::StrContains(LoadError(bad_endpoint), "names 'h2', not host:port"));
  TempConfig bad_prefix("etcd:\n  prefix: /horovodd\n");
  CHECK(absl::StrContains(LoadError(bad_prefix), "etcd.prefix: '/horovodd' does not end in '/'"));
  TempConfig bad_ttl("etcd:\n  lease_ttl: 1s\n");
  CHECK(absl::StrContains(LoadError(bad_ttl), "etcd.lease_ttl: '1s' is shorter than 2s"));
  TempConfig bad_advertise("etcd:\n  advertise: head-1\n");
  CHECK(absl::StrContains(LoadError(bad_advertise), "etcd.advertise: 'head-1' is not host:port"));
  flags.store = "etcd://";
  CHECK(absl::StartsWith(ApplyDaemonFlags(flags, *loaded).message(), "--store: 'etcd://'"));
}

TEST_CASE("bad flag values name the flag and the value") {
  DaemonConfig config;
  struct Case {
    DaemonFlags flags;
    std::string expected;
  };
  DaemonFlags listen, level, format, metrics;
  listen.listen = "localhost";
  level.log_level = "loud";
  format.log_format = "xml";
  metrics.metrics_listen = "127.0.0.1:99999";
  for (const auto& [flags, expected] :
       {Case{listen, "--listen: 'localhost' is not host:port"},
        Case{level, "--log-level: 'loud' is not a log level (trace, debug, info, warn, error)"},
        Case{format, "--log-format: 'xml' is not a log format (text, json)"},
        Case{metrics, "--metrics-listen: '127.0.0.1:99999' has no port between 0 and 65535"}}) {
    absl::Status st = ApplyDaemonFlags(flags, config);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StartsWith(st.message(), expected));
  }
}

TEST_CASE("an unknown key is an error naming the file, line, key and the known keys") {
  TempConfig file("listen: 127.0.0.1:7451\nlisten_port: 80\n");
  const std::string error = LoadError(file);
  CHECK(absl::StartsWith(error, file.path() + ":2: unknown key 'listen_port'"));
  CHECK(absl::StrContains(error,
                          "listen, state_dir, metrics_listen, log_level, log_format, shutdown, "
                          "worker, shim, limits"));
}

TEST_CASE("an unknown key inside a section names the section's keys") {
  TempConfig file("limits:\n  max_jobs: 5\n  max_gpus: 8\n");
  const std::string error = LoadError(file);
  CHECK(absl::StartsWith(error, file.path() + ":3: unknown key 'limits.max_gpus'"));
  CHECK(absl::StrContains(error, "in limits: max_jobs, max_workers_per_job"));
}

TEST_CASE("bad values name the file, line, key and value") {
  struct Case {
    std::string text;
    std::string expected;  // after "FILE:"
  };
  for (const auto& [text, expected] : {
           Case{"log_level: chatty\n",
                "1: log_level: 'chatty' is not a log level (trace, debug, info, warn, error)"},
           Case{"log_format: xml\n", "1: log_format: 'xml' is not a log format (text, json)"},
           Case{"# ports\nlisten: 7451\n",
                "2: listen: '7451' is not host:port (e.g. 127.0.0.1:7451)"},
           Case{"listen: ::1:7451\n", "1: listen: '::1:7451' is not host:port (an IPv6 host"},
           Case{"metrics_listen: 127.0.0.1:http\n",
                "1: metrics_listen: '127.0.0.1:http' has no port between 0 and 65535"},
           Case{"state_dir: var/lib/horovodd\n",
                "1: state_dir: 'var/lib/horovodd' is not an absolute path"},
           Case{"limits:\n  max_jobs: 0\n", "2: limits.max_jobs: '0' is not a whole number >= 1"},
           Case{"limits:\n  max_workers_per_job: many\n",
                "2: limits.max_workers_per_job: 'many' is not a whole number >= 1"},
           Case{"limits: 5\n", "1: limits: must be a map of max_jobs, max_workers_per_job"},
           Case{"listen: [a, b]\n", "1: listen: must be a single value"},
           Case{"log_level:\n", "1: log_level: has no value"},
       }) {
    TempConfig file(text);
    INFO(text);
    CHECK(absl::StartsWith(LoadError(file), file.path() + ":" + expected));
  }
}

TEST_CASE("malformed YAML names the file, line and column") {
  TempConfig file("listen: 127.0.0.1:7451\nlimits: {max_jobs: 5\n");
  const std::string error = LoadError(file);
  CHECK(absl::StartsWith(error, file.path() + ":3:"));
  CHECK(absl::StrContains(error, "malformed YAML"));
}

TEST_CASE("a file that is not a map of settings is an error") {
  TempConfig file("- listen\n- state_dir\n");
  CHECK(absl::StartsWith(LoadError(file), file.path() + ":1: the file must be a map of settings"));
}

TEST_CASE("a missing config file is NOT_FOUND naming the path and why") {
  auto loaded = LoadDaemonConfig("/nonexistent/horovodd.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kNotFound);
  CHECK(loaded.status().message() ==
        "cannot read config file '/nonexistent/horovodd.yaml': No such file or directory");
}

TEST_CASE("every error is one line") {
  TempConfig file("limits: {max_jobs: [\n");
  CHECK(LoadError(file).find('\n') == std::string::npos);
}

TEST_CASE("the status page is off unless status_page.listen or --status-page-listen names it") {
  CHECK(DaemonConfig().status_page_listen.empty());
  TempConfig file("status_page:\n  listen: 127.0.0.1:9465\n");
  auto loaded = LoadDaemonConfig(file.path());
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  CHECK(loaded->status_page_listen == "127.0.0.1:9465");
  DaemonFlags flags;
  flags.status_page_listen = "[::1]:0";
  REQUIRE(ApplyDaemonFlags(flags, *loaded).ok());
  CHECK(loaded->status_page_listen == "[::1]:0");
  flags.status_page_listen = "";
  REQUIRE(ApplyDaemonFlags(flags, *loaded).ok());
  CHECK(loaded->status_page_listen.empty());

  TempConfig bad("status_page:\n  listen: nowhere\n");
  CHECK_THAT(LoadError(bad), Catch::Contains("status_page.listen"));
  flags.status_page_listen = "127.0.0.1:99999";
  CHECK(absl::StartsWith(ApplyDaemonFlags(flags, *loaded).message(),
                         "--status-page-listen: '127.0.0.1:99999' has no port"));
}
