// horovodrun's settings as the user wrote them, before conversion: the YAML config file
// (--config-file), which holds the same settings as the command-line flags keyed by the long
// flag name in snake_case, or in Horovod's sections (params, autotune, timeline, stall_check,
// library_options, logging: horovod/runner/common/util/config_parser.py), and the typed reads
// that run_options.cc applies to the file and the command line alike. Loading only checks the
// file's shape (known keys; scalar, list or map where each belongs); the reads check the
// values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace horovodd::cli {

// One setting as the user wrote it, before conversion.
struct RawSetting {
  // Where it came from, for error messages: "--min-np" or "/path/job.yaml:3: min_np".
  std::string origin;
  // One scalar for most settings; two for blacklist_cooldown_range; one "NAME=VALUE" per
  // variable for env.
  std::vector<std::string> values;
};

// Settings keyed by snake_case name ("min_np", "host_discovery_script", ...).
using RawSettings = std::map<std::string, RawSetting>;

// Reads the config file at `path`. Relative paths inside it (host_discovery_script, hostfile,
// cwd) are resolved against the file's own directory, so a config kept next to its discovery
// script works from anywhere. `hosts` and `network_interface(s)` may be "a:2,b" or a list
// ["a:2", "b"]. A section key gives the flag's setting ("params: {cycle_time_ms: 5}" is
// cycle_time_ms; "stall_check: {enabled: false}" is no_stall_check true), its origin naming
// "params.cycle_time_ms"; a setting given twice, under any name, is an error.
// INVALID_ARGUMENT for malformed YAML (message names file:line:column), an unknown key or a
// value of the wrong shape (file:line and key); NOT_FOUND when the file cannot be read.
absl::StatusOr<RawSettings> LoadConfigFile(const std::string& path);

// Typed reads. Every error is INVALID_ARGUMENT and starts with the setting's origin, then
// names the value: "--min-np: 'two' is not a whole number".
const RawSetting* FindSetting(const RawSettings& settings, const std::string& key);
absl::Status InvalidSetting(const RawSetting& setting, const std::string& problem);
// A whole number >= min_allowed; nullopt when not set.
absl::StatusOr<std::optional<int>> ReadInt(const RawSettings& settings, const std::string& key,
                                           int min_allowed);
// A finite number of seconds, > 0 (or >= 0 when zero_allowed); `text` is one of its values.
absl::StatusOr<double> ParseSeconds(const RawSetting& setting, const std::string& text,
                                    bool zero_allowed);
// A duration > 0; `fallback` when not set.
absl::StatusOr<double> ReadSeconds(const RawSettings& settings, const std::string& key,
                                   double fallback);
// true/yes/on/1 or false/no/off/0, any case; false when not set.
absl::StatusOr<bool> ReadBool(const RawSettings& settings, const std::string& key);

}  // namespace horovodd::cli
