#include "cli/horovodrun/config_file.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace horovodd::cli {
namespace {

namespace fs = std::filesystem;

enum class Shape {
  kScalar,  // num_proc: 4
  kPath,    // a scalar; relative paths are resolved against the file's directory
  kList,    // "a:2,b" or ["a:2", "b"], joined with ','
  kPair,    // [lo, hi]
  kEnvMap,  // {NAME: VALUE}
};

struct KeyShape {
  const char* key;
  Shape shape;
  const char* setting = nullptr;  // the setting it gives, when not `key`
};

// Every key the file may hold at its top level: the long flags of horovodrun in snake_case.
// Flags that only make sense for one invocation (--config-file, --detach, --help, --version,
// --check-build) have no key. Horovod's sections are below.
constexpr KeyShape kKeys[] = {
    {"num_proc", Shape::kScalar},
    {"min_np", Shape::kScalar},
    {"max_np", Shape::kScalar},
    {"host_discovery_script", Shape::kPath},
    {"slots_per_host", Shape::kScalar},
    {"hosts", Shape::kList},
    {"hostfile", Shape::kPath},
    {"reset_limit", Shape::kScalar},
    {"hot_spares", Shape::kScalar},
    {"elastic_timeout", Shape::kScalar},
    {"start_timeout", Shape::kScalar},
    {"blacklist_cooldown_range", Shape::kPair},
    {"discovery_interval", Shape::kScalar},
    {"discovery_timeout", Shape::kScalar},
    {"liveness_timeout", Shape::kScalar},
    {"evict_stragglers", Shape::kScalar},
    {"verbose", Shape::kScalar},
    {"log_level", Shape::kScalar},
    {"log_with_timestamp", Shape::kScalar},
    {"prefix_output_with_timestamp", Shape::kScalar},
    {"output_filename", Shape::kScalar},
    {"disable_cache", Shape::kScalar},
    {"daemon", Shape::kScalar},
    {"cwd", Shape::kPath},
    {"ssh_port", Shape::kScalar},
    {"ssh_user", Shape::kScalar},
    {"ssh_identity_file", Shape::kPath},
    {"ssh_known_hosts", Shape::kPath},
    {"ssh_host_key_checking", Shape::kScalar},
    {"network_interface", Shape::kList},
    {"network_interfaces", Shape::kList, "network_interface"},
    {"env", Shape::kEnvMap},
    // Horovod's top-level key: gloo (what horovodd runs), or mpi (refused).
    {"controller", Shape::kScalar},
    {"gloo", Shape::kScalar},
    {"mpi", Shape::kScalar},
    {"jsrun", Shape::kScalar},
    // The tunables (tunables.h), also in Horovod's sections below.
    {"fusion_threshold_mb", Shape::kScalar},
    {"cycle_time_ms", Shape::kScalar},
    {"cache_capacity", Shape::kScalar},
    {"hierarchical_allreduce", Shape::kScalar},
    {"hierarchical_allgather", Shape::kScalar},
    {"autotune", Shape::kScalar},
    {"autotune_log_file", Shape::kScalar},
    {"autotune_warmup_samples", Shape::kScalar},
    {"autotune_steps_per_sample", Shape::kScalar},
    {"autotune_bayes_opt_max_samples", Shape::kScalar},
    {"autotune_gaussian_process_noise", Shape::kScalar},
    {"timeline_filename", Shape::kScalar},
    {"timeline_mark_cycles", Shape::kScalar},
    {"no_stall_check", Shape::kScalar},
    {"stall_check_warning_time_seconds", Shape::kScalar},
    {"stall_check_shutdown_time_seconds", Shape::kScalar},
    {"mpi_threads_disable", Shape::kScalar},
    {"mpi_args", Shape::kScalar},
    {"binding_args", Shape::kScalar},
    {"tcp", Shape::kScalar},
    {"num_nccl_streams", Shape::kScalar},
    {"thread_affinity", Shape::kScalar},
    {"gloo_timeout_seconds", Shape::kScalar},
};

// Horovod's YAML schema (horovod/runner/common/util/config_parser.py): a section, a key in
// it, and the setting it gives. Every value is a scalar.
struct SectionKey {
  const char* section;
  const char* key;
  const char* setting;
  bool negated = false;  // stall_check.enabled: false is no_stall_check: true
};

constexpr SectionKey kSectionKeys[] = {
    {"params", "fusion_threshold_mb", "fusion_threshold_mb"},
    {"params", "cycle_time_ms", "cycle_time_ms"},
    {"params", "cache_capacity", "cache_capacity"},
    {"params", "hierarchical_allreduce", "hierarchical_allreduce"},
    {"params", "hierarchical_allgather", "hierarchical_allgather"},
    {"autotune", "enabled", "autotune"},
    {"autotune", "log_file", "autotune_log_file"},
    {"autotune", "warmup_samples", "autotune_warmup_samples"},
    {"autotune", "steps_per_sample", "autotune_steps_per_sample"},
    {"autotune", "bayes_opt_max_samples", "autotune_bayes_opt_max_samples"},
    {"autotune", "gaussian_process_noise", "autotune_gaussian_process_noise"},
    {"timeline", "filename", "timeline_filename"},
    {"timeline", "mark_cycles", "timeline_mark_cycles"},
    {"stall_check", "enabled", "no_stall_check", /*negated=*/true},
    {"stall_check", "warning_time_seconds", "stall_check_warning_time_seconds"},
    {"stall_check", "shutdown_time_seconds", "stall_check_shutdown_time_seconds"},
    {"library_options", "mpi_threads_disable", "mpi_threads_disable"},
    {"library_options", "num_nccl_streams", "num_nccl_streams"},
    {"library_options", "thread_affinity", "thread_affinity"},
    {"library_options", "gloo_timeout_seconds", "gloo_timeout_seconds"},
    {"logging", "level", "log_level"},
    {"logging", "with_timestamp", "log_with_timestamp"},
};

bool IsSection(const std::string& key) {
  for (const SectionKey& k : kSectionKeys) {
    if (key == k.section) return true;
  }
  return false;
}

const SectionKey* FindSectionKey(const std::string& section, const std::string& key) {
  for (const SectionKey& k : kSectionKeys) {
    if (section == k.section && key == k.key) return &k;
  }
  return nullptr;
}

std::string SectionKeys(const std::string& section) {
  std::vector<std::string> names;
  for (const SectionKey& k : kSectionKeys) {
    if (section == k.section) names.push_back(k.key);
  }
  return absl::StrJoin(names, ", ");
}

const KeyShape* FindKey(const std::string& key) {
  for (const KeyShape& k : kKeys) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

std::string KnownKeys() {
  std::vector<std::string> names = {"params",      "autotune",        "timeline",
                                    "stall_check", "library_options", "logging"};
  for (const KeyShape& k : kKeys) {
    if (!IsSection(k.key)) names.push_back(k.key);
  }
  return absl::StrJoin(names, ", ");
}

// "file:line: " for a node (yaml-cpp counts lines from 0).
std::string Where(const std::string& path, const YAML::Node& node) {
  return absl::StrCat(path, ":", node.Mark().line + 1, ": ");
}

absl::StatusOr<std::string> ScalarOf(const std::string& where, const std::string& what,
                                     const YAML::Node& node) {
  if (node.IsNull()) return absl::InvalidArgumentError(absl::StrCat(where, what, " has no value"));
  if (!node.IsScalar()) {
    return absl::InvalidArgumentError(absl::StrCat(where, what, " must be a single value"));
  }
  return node.Scalar();
}

// The values of one key, shaped as RawSetting::values expects.
// `where` is the key's "file:line: "; each env entry names its own line.
absl::StatusOr<std::vector<std::string>> ValuesOf(const std::string& path, const std::string& where,
                                                  const KeyShape& key, const YAML::Node& node,
                                                  const fs::path& config_dir) {
  switch (key.shape) {
    case Shape::kScalar: {
      HVDD_ASSIGN_OR_RETURN(std::string value, ScalarOf(where, key.key, node));
      return std::vector<std::string>{value};
    }
    case Shape::kPath: {
      HVDD_ASSIGN_OR_RETURN(std::string value, ScalarOf(where, key.key, node));
      fs::path resolved(value);
      if (resolved.is_relative()) resolved = (config_dir / resolved).lexically_normal();
      return std::vector<std::string>{resolved.string()};
    }
    case Shape::kList: {
      if (!node.IsSequence()) {
        HVDD_ASSIGN_OR_RETURN(std::string value, ScalarOf(where, key.key, node));
        return std::vector<std::string>{value};
      }
      std::vector<std::string> hosts;
      for (const YAML::Node& item : node) {
        HVDD_ASSIGN_OR_RETURN(std::string host,
                              ScalarOf(where, absl::StrCat("each entry of ", key.key), item));
        hosts.push_back(host);
      }
      return std::vector<std::string>{absl::StrJoin(hosts, ",")};
    }
    case Shape::kPair: {
      if (!node.IsSequence() || node.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, key.key, " must be a list of two numbers, e.g. [10, 300]"));
      }
      std::vector<std::string> pair;
      for (const YAML::Node& item : node) {
        HVDD_ASSIGN_OR_RETURN(std::string value, ScalarOf(where, key.key, item));
        pair.push_back(value);
      }
      return pair;
    }
    case Shape::kEnvMap: {
      if (!node.IsMap()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, key.key, " must be a map of NAME: VALUE"));
      }
      std::vector<std::string> assignments;
      for (const auto& entry : node) {
        HVDD_ASSIGN_OR_RETURN(std::string name, ScalarOf(where, "a name in env", entry.first));
        absl::StatusOr<std::string> value =
            ScalarOf(Where(path, entry.first), absl::StrCat("env ", name), entry.second);
        if (!value.ok()) return value.status();
        assignments.push_back(absl::StrCat(name, "=", *value));
      }
      return assignments;
    }
  }
  return absl::InternalError(absl::StrCat("no shape for config key ", key.key));
}

// A key that gives a setting already given, under this name or another.
absl::Status CheckNotSet(const RawSettings& settings, const std::string& setting,
                         const std::string& where, const std::string& key) {
  auto it = settings.find(setting);
  if (it == settings.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, "duplicate key '", key, "' (already set by ", it->second.origin, ")"));
}

// One of Horovod's sections: a map of scalars, each key known to that section. An empty
// section sets nothing, as in Horovod.
absl::Status ReadSection(const std::string& path, const std::string& section,
                         const YAML::Node& node, RawSettings* settings) {
  if (node.IsNull()) return absl::OkStatus();
  const std::string where = Where(path, node);
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, section, " must be a map of settings (", SectionKeys(section), ")"));
  }
  for (const auto& entry : node) {
    const std::string entry_where = Where(path, entry.first);
    HVDD_ASSIGN_OR_RETURN(std::string key,
                          ScalarOf(entry_where, absl::StrCat("a key in ", section), entry.first));
    const std::string name = absl::StrCat(section, ".", key);
    const SectionKey* known = FindSectionKey(section, key);
    if (known == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(entry_where, "unknown key '", name, "' (",
                                                     section, " takes: ", SectionKeys(section),
                                                     ")"));
    }
    HVDD_RETURN_IF_ERROR(CheckNotSet(*settings, known->setting, entry_where, name));
    HVDD_ASSIGN_OR_RETURN(std::string value, ScalarOf(entry_where, name, entry.second));
    RawSetting setting{absl::StrCat(entry_where, name), {value}};
    if (known->negated) {
      RawSettings one{{known->setting, setting}};
      HVDD_ASSIGN_OR_RETURN(bool on, ReadBool(one, known->setting));
      setting.values = {on ? "false" : "true"};
    }
    (*settings)[known->setting] = std::move(setting);
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& path, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": malformed YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": malformed YAML: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<RawSettings> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--config-file ", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) {  // opens fine, then reads as an empty file
    return absl::InvalidArgumentError(absl::StrCat("--config-file ", path, ": is a directory"));
  }
  std::stringstream text;
  text << in.rdbuf();
  HVDD_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(path, text.str()));

  RawSettings settings;
  if (root.IsNull()) return settings;  // an empty file sets nothing
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(path, root), "the top level must be a map of settings (key: value)"));
  }
  const fs::path config_dir = fs::absolute(fs::path(path)).parent_path();
  try {
    for (const auto& entry : root) {
      const std::string where = Where(path, entry.first);
      HVDD_ASSIGN_OR_RETURN(std::string key, ScalarOf(where, "a key", entry.first));
      // "autotune" is a section (autotune: {enabled: true}) and a flat key (autotune: true).
      if (IsSection(key) && (entry.second.IsMap() || entry.second.IsNull() || !FindKey(key))) {
        HVDD_RETURN_IF_ERROR(ReadSection(path, key, entry.second, &settings));
        continue;
      }
      const KeyShape* shape = FindKey(key);
      if (shape == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "unknown key '", key, "' (known keys: ", KnownKeys(), ")"));
      }
      const std::string setting = shape->setting != nullptr ? shape->setting : key;
      HVDD_RETURN_IF_ERROR(CheckNotSet(settings, setting, where, key));
      absl::StatusOr<std::vector<std::string>> values =
          ValuesOf(path, where, *shape, entry.second, config_dir);
      if (!values.ok()) return values.status();
      settings[setting] = RawSetting{absl::StrCat(where, key), std::move(*values)};
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  return settings;
}

const RawSetting* FindSetting(const RawSettings& settings, const std::string& key) {
  auto it = settings.find(key);
  return it == settings.end() ? nullptr : &it->second;
}

absl::Status InvalidSetting(const RawSetting& setting, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(setting.origin, ": ", problem));
}

absl::StatusOr<std::optional<int>> ReadInt(const RawSettings& settings, const std::string& key,
                                           int min_allowed) {
  auto it = settings.find(key);
  if (it == settings.end()) return std::nullopt;
  const std::string& text = it->second.values.front();
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return InvalidSetting(it->second, absl::StrCat("'", text, "' is not a whole number"));
  }
  if (value < min_allowed) {
    return InvalidSetting(it->second, absl::StrCat(value, " is less than ", min_allowed));
  }
  return value;
}

absl::StatusOr<double> ParseSeconds(const RawSetting& setting, const std::string& text,
                                    bool zero_allowed) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return InvalidSetting(setting, absl::StrCat("'", text, "' is not a number of seconds"));
  }
  if (value < 0 || (value == 0 && !zero_allowed)) {
    return InvalidSetting(
        setting,
        absl::StrCat(text, " must be ", zero_allowed ? "0 or more" : "more than 0", " seconds"));
  }
  return value;
}

absl::StatusOr<double> ReadSeconds(const RawSettings& settings, const std::string& key,
                                   double fallback) {
  auto it = settings.find(key);
  if (it == settings.end()) return fallback;
  return ParseSeconds(it->second, it->second.values.front(), /*zero_allowed=*/false);
}

absl::StatusOr<bool> ReadBool(const RawSettings& settings, const std::string& key) {
  auto it = settings.find(key);
  if (it == settings.end()) return false;
  const std::string text = absl::AsciiStrToLower(it->second.values.front());
  if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
  if (text == "false" || text == "no" || text == "off" || text == "0") return false;
  return InvalidSetting(it->second,
                        absl::StrCat("'", it->second.values.front(), "' is not true or false"));
}

}  // namespace horovodd::cli
