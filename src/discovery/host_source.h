// Where the set of usable hosts comes from: a discovery script, a fixed list, or a hostfile.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "discovery/host_set.h"

namespace horovodd::discovery {

// One poll of "which hosts exist now". Called from one thread at a time, outside any lock (a
// script may run for its whole timeout). On error the caller keeps its last good host set.
class HostSource {
 public:
  virtual ~HostSource() = default;
  virtual absl::StatusOr<HostSet> Discover() = 0;
  // For logs and events: "script ./discover.sh", "static hosts", "hostfile /etc/hosts.txt".
  virtual std::string Describe() const = 0;
};

// Runs `path` (RunDiscoveryScript) and parses its stdout (ParseHostLines). Malformed output is
// INVALID_ARGUMENT naming the script and the bad line.
std::unique_ptr<HostSource> MakeScriptHostSource(std::string path, int default_slots,
                                                 absl::Duration timeout);

// Always the same hosts (horovodrun -H).
std::unique_ptr<HostSource> MakeStaticHostSource(HostSet hosts);

// Reads and parses the hostfile at `path` (ReadHostfile) on every poll, so an operator may
// edit it while a job runs.
std::unique_ptr<HostSource> MakeHostfileHostSource(std::string path, int default_slots);

// Reads a Horovod hostfile (ParseHostfile). Errors name the file: NOT_FOUND when it does not
// exist, PERMISSION_DENIED when it cannot be opened, INVALID_ARGUMENT when it is not a
// regular file or its contents are bad.
absl::StatusOr<HostSet> ReadHostfile(const std::string& path, int default_slots);

}  // namespace horovodd::discovery
