// Pure parsers for what Slurm tells a job about its allocation: the
// SLURM_TASKS_PER_NODE form ("2(x3),1") and the one-line-per-record output of
// `scontrol -o show node|job`. No I/O here (slurm_commands.h runs scontrol).
#pragma once

#include "absl/strings/string_view.h"
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace horovodd::discovery {

// "2(x3),1" -> {2, 2, 2, 1}: a count per node, in the allocation's node order.
// INVALID_ARGUMENT naming the bad entry for anything else ("", "2(x)", "0").
absl::StatusOr<std::vector<int>> ParseTasksPerNode(absl::string_view text);

// One record of `scontrol -o show ...`: "NodeName=node1 Arch=x86_64 ...". A value
// may hold spaces (OS=Linux 6.1.0 #1 SMP, Reason=not responding): a word that
// does not look like Key=... belongs to the value before it.
std::map<std::string, std::string> ParseScontrolRecord(absl::string_view line);

struct SlurmNode {
  std::string name;     // NodeName
  std::string address;  // NodeAddr (what the node's daemons are reached at)
  std::string state;    // State, e.g. "IDLE", "MIXED+DRAIN", "DOWN+NOT_RESPONDING"
};

// Every record of `scontrol -o show node ...`; a record without NodeName is an
// INVALID_ARGUMENT naming it.
absl::StatusOr<std::vector<SlurmNode>> ParseScontrolNodes(absl::string_view text);

// False for a node Slurm will not run new work on, or that is not there:
// DOWN, DRAIN (draining or drained), FAIL, NOT_RESPONDING (or a trailing '*'),
// powered down or powering down, FUTURE, REBOOT_ISSUED.
bool SlurmNodeUsable(absl::string_view state);

struct SlurmJob {
  std::string state;      // JobState, e.g. "RUNNING", "COMPLETED"
  std::string node_list;  // NodeList, e.g. "node[1-2]"; "(null)" before it runs
};

// The first record of `scontrol -o show job J`. INVALID_ARGUMENT without JobState.
absl::StatusOr<SlurmJob> ParseScontrolJob(absl::string_view text);

// A job id as horovodd passes it to srun/scontrol: digits, optionally one
// "_N" array index ("1234", "1234_7").
bool IsValidSlurmJobId(absl::string_view id);

}  // namespace horovodd::discovery
