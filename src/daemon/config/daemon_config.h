// horovodd's settings: the YAML config file (--config, documented key by key
// in config/horovodd.yaml) and the command-line flags that override its keys.
// Every setting has a default, so horovodd runs with no file at all.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/config/auth_settings.h"

namespace horovodd::daemon {

enum class LogFormat { kText, kJson };

// What one client may ask of the daemon (config key `limits`).
struct DaemonLimits {
  // Jobs that have not ended yet; one more is refused with RESOURCE_EXHAUSTED.
  int max_jobs = 100;
  // Cap on a job's workers: a larger -np or max_np is refused, and an elastic
  // job with no max_np (grow to whatever discovery finds) is capped here.
  int max_workers_per_job = 1024;
  // Largest request message gRPC reads (any RPC); bigger ones are refused
  // by gRPC before a handler sees them. Must exceed max_kv_value_bytes.
  int max_message_bytes = 16 << 20;
  // A submitted JobSpec, encoded (argv, env, hosts, everything).
  int max_job_spec_bytes = 1 << 20;
  // The key-value store workers bootstrap their rings through, per job.
  int max_kv_key_bytes = 1024;
  int max_kv_value_bytes = 4 << 20;
  int max_kv_keys_per_job = 100000;      // over all generations kept
  int max_kv_bytes_per_job = 256 << 20;  // keys plus values
  int max_kv_waiters_per_job = 8192;     // KvGet calls waiting for keys
  // Streams held open at once by one client (its peer IP address): WatchJob
  // streams each hold a daemon thread; Attach streams are one per worker.
  int max_watch_streams_per_client = 64;
  int max_attach_streams_per_client = 4096;
};

// The etcd cluster a replicated journal is kept in (keys etcd.*; used when
// `store` names etcd).
struct EtcdSettings {
  std::string prefix = "/horovodd/";  // every key of this horovodd's records starts with it
  // The leader's lease: how long after a leader is lost a standby takes over, at most.
  absl::Duration lease_ttl = absl::Seconds(5);
  // host:port the other daemons and clients reach this one at, published as
  // the leader's address while it leads; "" = the listen address (a
  // wildcard host replaced by this machine's name).
  std::string advertise;
  // TLS to the members; all empty: plaintext. A client certificate and key
  // for members that require one (etcd --client-cert-auth).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

struct DaemonConfig {
  std::string listen = "127.0.0.1:7451";        // host:port of the gRPC API; port 0 = any free
  std::string state_dir = "/var/lib/horovodd";  // job records (horovodd.db); empty = none kept
  // Where the job records are kept: "" = horovodd.db in state_dir (SQLite);
  // "etcd://h1:2379,h2:2379,h3:2379" = in that etcd cluster (etcd.*).
  std::string store;
  EtcdSettings etcd;                              // keys etcd.*
  std::string metrics_listen = "127.0.0.1:9464";  // host:port of GET /metrics; empty = off
  // status_page.listen: host:port of the status page (daemon/status_page/);
  // empty = off. TLS and tokens as for the gRPC API.
  std::string status_page_listen;
  std::string log_level = "info";  // trace | debug | info | warn | error
  LogFormat log_format = LogFormat::kText;
  // Workers outlive the daemon (docs/daemon.md, "Upgrading horovodd without
  // stopping jobs"). shutdown.stop_jobs: SIGTERM ends the running jobs (CANCELLED)
  // instead of leaving them to the next daemon on this state dir.
  bool stop_jobs_on_shutdown = false;
  // worker.daemon_grace: how long a worker trains on without its daemon
  // before it ends (exported to workers as HOROVODD_DAEMON_GRACE_S, unless a
  // job sets its own).
  absl::Duration worker_daemon_grace = absl::Minutes(10);
  // shim.binary: the horovodd-shim that supervises local workers; empty:
  // the one next to the horovodd executable.
  std::string shim_binary;
  DaemonLimits limits;
  AuthSettings auth;  // keys auth.* (see auth_config.h)
  TlsSettings tls;    // keys tls.*
};

// Command-line values; each one that is set replaces its config key.
struct DaemonFlags {
  std::optional<std::string> listen;
  std::optional<std::string> state_dir;
  std::optional<std::string> store;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> status_page_listen;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  // The auth and tls flags that are set, by flag name ("--admin-token-file").
  std::map<std::string, std::string> security;
};

// Reads the config file at `path`: the defaults above, replaced by the keys it
// sets. NOT_FOUND when it cannot be read; INVALID_ARGUMENT for malformed YAML,
// an unknown key or a bad value, the message starting with "FILE:LINE: " and
// naming the key and the value.
absl::StatusOr<DaemonConfig> LoadDaemonConfig(const std::string& path);

// The same for YAML `text` already read; `name` stands for the file in
// messages. What LoadDaemonConfig does after reading the file (and what the
// config fuzz target calls).
absl::StatusOr<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& name);

// Applies the flags that are set; INVALID_ARGUMENT naming the flag and value.
absl::Status ApplyDaemonFlags(const DaemonFlags& flags, DaemonConfig& config);

}  // namespace horovodd::daemon
