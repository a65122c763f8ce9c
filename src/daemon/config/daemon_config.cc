#include "daemon/config/daemon_config.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "daemon/config/auth_config.h"
#include "yaml-cpp/yaml.h"

namespace horovodd::daemon {
namespace {

// Every check names where the value came from: "--listen" or
// "/etc/horovodd/horovodd.yaml:3: listen".
absl::Status Bad(const std::string& origin, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": '", value, "' ", why));
}

// host:port, with the host in brackets for IPv6 ("[::1]:7451").
absl::Status CheckHostPort(const std::string& origin, const std::string& value) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(value);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", parsed.status().message()));
  }
  return absl::OkStatus();
}

absl::Status SetListen(const std::string& origin, const std::string& value, DaemonConfig& c) {
  HVDD_RETURN_IF_ERROR(CheckHostPort(origin, value));
  c.listen = value;
  return absl::OkStatus();
}

absl::Status SetStateDir(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (!value.empty() && value.front() != '/') {
    return Bad(origin, value, "is not an absolute path");
  }
  c.state_dir = value;
  return absl::OkStatus();
}

// "" (SQLite in the state dir) or etcd://host:port,host:port,...
absl::Status SetStore(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (!value.empty()) {
    absl::string_view endpoints = value;
    if (!absl::ConsumePrefix(&endpoints, "etcd://")) {
      return Bad(origin, value, "is not \"\" (SQLite in the state dir) or etcd://host:port,...");
    }
    std::vector<std::string> list = absl::StrSplit(endpoints, ',');
    for (const std::string& endpoint : list) {
      if (!ParseHostPort(endpoint).ok()) {
        return Bad(origin, value, absl::StrCat("names '", endpoint, "', not host:port"));
      }
    }
  }
  c.store = value;
  return absl::OkStatus();
}

absl::Status SetEtcdPrefix(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (value.empty() || value.back() != '/') return Bad(origin, value, "does not end in '/'");
  c.etcd.prefix = value;
  return absl::OkStatus();
}

// An absolute path, or "" for none.
absl::Status SetOptionalPath(const std::string& origin, const std::string& value,
                             std::string& path) {
  if (!value.empty() && value.front() != '/') {
    return Bad(origin, value, "is not an absolute path");
  }
  path = value;
  return absl::OkStatus();
}

// host:port, or "" for a listener that is off.
absl::Status SetOptionalAddress(const std::string& origin, const std::string& value,
                                std::string& address) {
  if (!value.empty()) {
    HVDD_RETURN_IF_ERROR(CheckHostPort(origin, value));
  }
  address = value;
  return absl::OkStatus();
}

absl::Status SetMetricsListen(const std::string& origin, const std::string& value,
                              DaemonConfig& c) {
  return SetOptionalAddress(origin, value, c.metrics_listen);
}

absl::Status SetStatusPageListen(const std::string& origin, const std::string& value,
                                 DaemonConfig& c) {
  return SetOptionalAddress(origin, value, c.status_page_listen);
}

absl::Status SetLogLevel(const std::string& origin, const std::string& value, DaemonConfig& c) {
  static const char* const kLevels[] = {"trace", "debug", "info", "warn", "error"};
  for (const char* level : kLevels) {
    if (value == level) {
      c.log_level = value;
      return absl::OkStatus();
    }
  }
  return Bad(origin, value, "is not a log level (trace, debug, info, warn, error)");
}

absl::Status SetLogFormat(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (value == "text") {
    c.log_format = LogFormat::kText;
  } else if (value == "json") {
    c.log_format = LogFormat::kJson;
  } else {
    return Bad(origin, value, "is not a log format (text, json)");
  }
  return absl::OkStatus();
}

absl::Status SetPositive(const std::string& origin, const std::string& value, int& out) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 1)
    return Bad(origin, value, "is not a whole number >= 1");
  out = n;
  return absl::OkStatus();
}

// Every `limits:` key is a whole number >= 1 kept in one DaemonLimits field.
struct LimitKey {
  const char* name;
  int DaemonLimits::*field;
};

const std::vector<LimitKey>& LimitKeys() {
  static const std::vector<LimitKey> keys = {
      {"limits.max_jobs", &DaemonLimits::max_jobs},
      {"limits.max_workers_per_job", &DaemonLimits::max_workers_per_job},
      {"limits.max_message_bytes", &DaemonLimits::max_message_bytes},
      {"limits.max_job_spec_bytes", &DaemonLimits::max_job_spec_bytes},
      {"limits.max_kv_key_bytes", &DaemonLimits::max_kv_key_bytes},
      {"limits.max_kv_value_bytes", &DaemonLimits::max_kv_value_bytes},
      {"limits.max_kv_keys_per_job", &DaemonLimits::max_kv_keys_per_job},
      {"limits.max_kv_bytes_per_job", &DaemonLimits::max_kv_bytes_per_job},
      {"limits.max_kv_waiters_per_job", &DaemonLimits::max_kv_waiters_per_job},
      {"limits.max_watch_streams_per_client", &DaemonLimits::max_watch_streams_per_client},
      {"limits.max_attach_streams_per_client", &DaemonLimits::max_attach_streams_per_client},
  };
  return keys;
}

// Limits that only make sense together.
absl::Status CheckLimitsAgree(const std::string& name, const DaemonLimits& limits) {
  // A KvSet carries the value plus the key and the worker's identity.
  const int64_t kv_set_bytes =
      static_cast<int64_t>(limits.max_kv_value_bytes) + limits.max_kv_key_bytes + 4096;
  if (limits.max_message_bytes < kv_set_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": limits.max_message_bytes (", limits.max_message_bytes,
        ") must be at least limits.max_kv_value_bytes + limits.max_kv_key_bytes + 4096 (",
        kv_set_bytes, "), or the largest allowed key-value write could not be sent"));
  }
  if (limits.max_message_bytes < limits.max_job_spec_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": limits.max_message_bytes (", limits.max_message_bytes,
        ") must be at least limits.max_job_spec_bytes (", limits.max_job_spec_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status SetStopJobs(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (value == "true") {
    c.stop_jobs_on_shutdown = true;
  } else if (value == "false") {
    c.stop_jobs_on_shutdown = false;
  } else {
    return Bad(origin, value, "is not true or false");
  }
  return absl::OkStatus();
}

// Seconds ("600") or a duration ("90s", "10m"), at least `minimum`;
// `examples` are the durations the error suggests.
absl::Status SetDurationAtLeast(const std::string& origin, const std::string& value,
                                absl::Duration minimum, const char* examples, absl::Duration& out) {
  double seconds = 0;
  absl::Duration parsed;
  if (absl::SimpleAtod(value, &seconds)) {
    parsed = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, &parsed)) {
    return Bad(origin, value, absl::StrCat("is not a duration (seconds, or e.g. ", examples, ")"));
  }
  if (parsed < minimum) {
    return Bad(origin, value, absl::StrCat("is shorter than ", absl::FormatDuration(minimum)));
  }
  out = parsed;
  return absl::OkStatus();
}

absl::Status SetDaemonGrace(const std::string& origin, const std::string& value, DaemonConfig& c) {
  return SetDurationAtLeast(origin, value, absl::Seconds(1), "10m, 90s", c.worker_daemon_grace);
}

// At least 2s: etcd counts leases in seconds.
absl::Status SetLeaseTtl(const std::string& origin, const std::string& value, DaemonConfig& c) {
  return SetDurationAtLeast(origin, value, absl::Seconds(2), "5s", c.etcd.lease_ttl);
}

absl::Status SetEtcdAdvertise(const std::string& origin, const std::string& value,
                              DaemonConfig& c) {
  if (!value.empty()) {
    absl::StatusOr<HostPort> address = ParseHostPort(value);
    if (!address.ok() || address->port == 0) return Bad(origin, value, "is not host:port");
  }
  c.etcd.advertise = value;
  return absl::OkStatus();
}

absl::Status SetShimBinary(const std::string& origin, const std::string& value, DaemonConfig& c) {
  if (!value.empty() && value.front() != '/') {
    return Bad(origin, value, "is not an absolute path");
  }
  c.shim_binary = value;
  return absl::OkStatus();
}

using Setter = std::function<absl::Status(const std::string& origin, const std::string& value,
                                          DaemonConfig& config)>;
struct Key {
  const char* name;  // dotted for keys inside a section: "limits.max_jobs"
  Setter set;
  bool null_is_empty;  // "key:" with no value means "" (off) rather than an error
};

const std::vector<Key>& Keys() {
  static const std::vector<Key> keys = {
      {"listen", SetListen, false},
      {"state_dir", SetStateDir, true},
      {"metrics_listen", SetMetricsListen, true},
      {"log_level", SetLogLevel, false},
      {"log_format", SetLogFormat, false},
      {"shutdown.stop_jobs", SetStopJobs, false},
      {"worker.daemon_grace", SetDaemonGrace, false},
      {"shim.binary", SetShimBinary, true},
  };
  static const std::vector<Key> all = [] {
    std::vector<Key> with_limits = keys;
    for (const LimitKey& limit : LimitKeys()) {
      int DaemonLimits::*field = limit.field;
      with_limits.push_back({limit.name,
                             [field](const std::string& o, const std::string& v, DaemonConfig& c) {
                               return SetPositive(o, v, c.limits.*field);
                             },
                             false});
    }
    for (const SecurityKey& key : SecurityKeys()) {  // auth.*, tls.* (auth_config.cc)
      with_limits.push_back({key.name, key.set, true});
    }
    with_limits.push_back({"status_page.listen", SetStatusPageListen, true});
    const std::vector<Key> store_keys = {
        {"store", SetStore, true},
        {"etcd.prefix", SetEtcdPrefix, false},
        {"etcd.lease_ttl", SetLeaseTtl, false},
        {"etcd.advertise", SetEtcdAdvertise, false},
        {"etcd.ca_file",
         [](const std::string& o, const std::string& v, DaemonConfig& c) {
           return SetOptionalPath(o, v, c.etcd.ca_file);
         },
         true},
        {"etcd.cert_file",
         [](const std::string& o, const std::string& v, DaemonConfig& c) {
           return SetOptionalPath(o, v, c.etcd.cert_file);
         },
         true},
        {"etcd.key_file",
         [](const std::string& o, const std::string& v, DaemonConfig& c) {
           return SetOptionalPath(o, v, c.etcd.key_file);
         },
         true},
    };
    with_limits.insert(with_limits.end(), store_keys.begin(), store_keys.end());
    return with_limits;
  }();
  return all;
}

const Key* FindKey(const std::string& name) {
  for (const Key& key : Keys()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

// The keys of `section` ("" = top level), for "unknown key" messages.
std::string KeysIn(const std::string& section) {
  std::vector<std::string> names;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const Key& key : Keys()) {
    std::string name = key.name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    name = name.substr(prefix.size());
    name = name.substr(0, name.find('.'));  // a section shows once, by its name
    if (names.empty() || names.back() != name) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

bool IsSection(const std::string& name) {
  const std::string prefix = name + ".";
  for (const Key& key : Keys()) {
    if (std::string(key.name).compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

class FileReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {}

  absl::Status ReadMap(const YAML::Node& map, const std::string& section, DaemonConfig& config) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key_node = it->first;
      const YAML::Node value = it->second;
      if (!key_node.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(key_node), "a key must be a name"));
      }
      const std::string name =
          section.empty() ? key_node.Scalar() : absl::StrCat(section, ".", key_node.Scalar());
      if (IsSection(name)) {
        // "limits:" with every key under it commented out keeps the defaults.
        if (value.IsNull()) continue;
        if (!value.IsMap()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(key_node), name, ": must be a map of ", KeysIn(name)));
        }
        HVDD_RETURN_IF_ERROR(ReadMap(value, name, config));
        continue;
      }
      const Key* key = FindKey(name);
      if (key == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(key_node), "unknown key '", name, "' (known keys",
            section.empty() ? "" : absl::StrCat(" in ", section), ": ", KeysIn(section), ")"));
      }
      const std::string origin = absl::StrCat(Where(value.IsNull() ? key_node : value), name);
      std::string text;
      if (value.IsNull() && key->null_is_empty) {
        text = "";
      } else if (value.IsScalar()) {
        text = value.Scalar();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": ", value.IsNull() ? "has no value" : "must be a single value"));
      }
      HVDD_RETURN_IF_ERROR(key->set(origin, text, config));
    }
    return absl::OkStatus();
  }

 private:
  // "FILE:LINE: " (yaml-cpp counts lines from 0).
  std::string Where(const YAML::Node& node) const {
    return absl::StrCat(path_, ":", node.Mark().line + 1, ": ");
  }

  const std::string path_;
};

}  // namespace

absl::StatusOr<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read config file '", path, "': ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseDaemonConfig(text.str(), path);
}

absl::StatusOr<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& name) {
  DaemonConfig config;
  try {
    const YAML::Node root = YAML::Load(text);
    if (root.IsNull()) return config;  // an empty file keeps every default
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", root.Mark().line + 1,
                                                     ": the file must be a map of settings (",
                                                     KeysIn(""), ")"));
    }
    HVDD_RETURN_IF_ERROR(FileReader(name).ReadMap(root, "", config));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": malformed YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", e.mark.line + 1, ": cannot read: ", e.msg));
  }
  HVDD_RETURN_IF_ERROR(CheckLimitsAgree(name, config.limits));
  return config;
}

absl::Status ApplyDaemonFlags(const DaemonFlags& flags, DaemonConfig& config) {
  // On the command line a relative state dir means one under the current
  // directory; the config file, read by a service started in /, wants absolute paths.
  std::optional<std::string> state_dir = flags.state_dir;
  if (state_dir && !state_dir->empty()) {
    std::error_code error;
    auto absolute = std::filesystem::absolute(*state_dir, error);
    if (!error) state_dir = absolute.lexically_normal().string();
  }
  struct Flag {
    const char* name;
    const std::optional<std::string>& value;
    Setter set;
  };
  const Flag kFlags[] = {
      {"--listen", flags.listen, SetListen},
      {"--state-dir", state_dir, SetStateDir},
      {"--store", flags.store, SetStore},
      {"--metrics-listen", flags.metrics_listen, SetMetricsListen},
      {"--status-page-listen", flags.status_page_listen, SetStatusPageListen},
      {"--log-level", flags.log_level, SetLogLevel},
      {"--log-format", flags.log_format, SetLogFormat},
  };
  for (const Flag& flag : kFlags) {
    if (!flag.value.has_value()) continue;
    HVDD_RETURN_IF_ERROR(flag.set(flag.name, *flag.value, config));
  }
  for (const auto& [flag, value] : flags.security) {
    HVDD_RETURN_IF_ERROR(ApplySecurityFlag(flag, value, config));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::daemon
