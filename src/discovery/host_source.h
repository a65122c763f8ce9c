// Where an elastic job's set of usable hosts comes from, polled by the job's driver: a
// discovery script here, the Slurm allocation in slurm_host_source.h. A fixed set of hosts
// (horovodrun -H, --hostfile) is read once by horovodrun and comes in the job's spec.
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
  // For logs and events: "script ./discover.sh", "Slurm job 1234".
  virtual std::string Describe() const = 0;
};

// Runs `path` (RunDiscoveryScript) and parses its stdout (ParseHostLines). Malformed output is
// INVALID_ARGUMENT naming the script and the bad line.
std::unique_ptr<HostSource> MakeScriptHostSource(std::string path, int default_slots,
                                                 absl::Duration timeout);

}  // namespace horovodd::discovery
