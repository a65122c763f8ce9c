// The few Slurm client commands horovodd runs (scontrol), each a child process
// with a timeout (RunCommand), their output parsed by slurm_parser.h. Used by
// the Slurm host source, the Slurm launcher and horovodrun's checks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "discovery/slurm_parser.h"

namespace horovodd::discovery {

// Runs argv and returns its stdout: RunCommand, unless a test substitutes it.
using CommandRunner =
    std::function<absl::StatusOr<std::string>(const std::vector<std::string>& argv)>;

CommandRunner DefaultCommandRunner(absl::Duration timeout);

// `scontrol -o show job ID`. NOT_FOUND when Slurm no longer knows the job (it
// ended and was purged); UNAVAILABLE (with scontrol's last stderr line) when
// slurmctld cannot be reached; NOT_FOUND naming scontrol when it is not installed.
absl::StatusOr<SlurmJob> ShowSlurmJob(const CommandRunner& run, const std::string& job_id);

// `scontrol show hostnames LIST`: "node[1-3],gpu7" -> node1 node2 node3 gpu7.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(const CommandRunner& run,
                                                             const std::string& list);

// `scontrol -o show node LIST`: the nodes' addresses and states.
absl::StatusOr<std::vector<SlurmNode>> ShowSlurmNodes(const CommandRunner& run,
                                                      const std::string& list);

}  // namespace horovodd::discovery
