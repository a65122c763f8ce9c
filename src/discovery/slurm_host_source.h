// The Slurm host source (horovodrun --host-discovery slurm): the usable nodes of
// one Slurm allocation, polled like a discovery script.
//
// Each poll asks slurmctld for the job (`scontrol -o show job`: its state and
// node list, so a job shrunk with `scontrol update jobid=J NumNodes=N` loses
// the nodes it gave back) and for those nodes' states (`scontrol -o show node`).
// A node that is DOWN, DRAIN(ED/ING), FAIL or not responding is left out, and
// comes back once Slurm says it is usable again. A job that ended, or that Slurm
// has forgotten, has no hosts. Any other failure (slurmctld unreachable, scontrol
// missing or timing out) is an error: the caller keeps its last good set, as for
// a failing script.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "discovery/host_source.h"
#include "discovery/slurm_commands.h"

namespace horovodd::discovery {

struct SlurmHostSourceOptions {
  std::string job_id;          // SLURM_JOB_ID
  std::string node_list;       // SLURM_JOB_NODELIST at submission
  std::string tasks_per_node;  // SLURM_TASKS_PER_NODE at submission, e.g. "2(x3),1"
  // > 0: every node has this many slots (--slots-per-host); else the node's count in
  // tasks_per_node, and 1 for a node that was not in node_list.
  int slots_per_host = 0;
  CommandRunner run;  // unset: RunCommand with `timeout`
  absl::Duration timeout = absl::Seconds(10);
};

std::unique_ptr<HostSource> MakeSlurmHostSource(SlurmHostSourceOptions options);

}  // namespace horovodd::discovery
