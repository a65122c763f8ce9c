// horovodrun's --launcher (slurm|ssh|local) and --host-discovery slurm, and the
// Slurm allocation they work in, read from horovodrun's own environment
// (SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) into the JobSpec.
// Inside an allocation (SLURM_JOB_ID set) the launcher is slurm unless said
// otherwise, and the slurm launcher with no host option takes its hosts from
// the allocation.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/horovodrun/config_file.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

// Looks a variable up; "" when unset. Tests pass their own.
using EnvLookup = std::function<std::string(const std::string& name)>;
EnvLookup ProcessEnvironment();

struct SlurmChoice {
  bool slurm_discovery = false;     // spec.discovery().slurm()
  bool explicit_discovery = false;  // --host-discovery slurm given (makes the job elastic)
};

// Fills spec->launcher(), spec->slurm() and spec->discovery().slurm(). With Slurm
// discovery and no --slots-per-host, default_slots becomes 0 (the allocation's
// tasks per node count). INVALID_ARGUMENT naming the setting for a value that is
// not one of the choices, for --host-discovery with another host option, and for
// Slurm without an allocation (SLURM_JOB_ID unset) or with a SLURM_TASKS_PER_NODE
// that cannot be read.
absl::StatusOr<SlurmChoice> ReadSlurmSettings(const RawSettings& settings, const EnvLookup& env,
                                              v1::JobSpec* spec);

// For a spec that uses Slurm: srun is in PATH (slurm launcher) and slurmctld
// answers for the allocation (`scontrol show job`). FAILED_PRECONDITION with one
// line saying what is missing; OK for a spec without Slurm.
absl::Status CheckSlurmReachable(const v1::JobSpec& spec);

}  // namespace horovodd::cli
