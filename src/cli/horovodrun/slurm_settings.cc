#include "cli/horovodrun/slurm_settings.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/loopback.h"
#include "common/status_macros.h"
#include "discovery/host_parser.h"
#include "discovery/script_runner.h"
#include "discovery/slurm_commands.h"
#include "discovery/slurm_parser.h"

namespace horovodd::cli {
namespace {

constexpr absl::Duration kSlurmCheckTimeout = absl::Seconds(20);

// Whether -H is the only host option and names loopback hosts only.
bool HostsAreThisMachine(const RawSettings& settings) {
  const RawSetting* hosts = FindSetting(settings, "hosts");
  if (hosts == nullptr || hosts->values.empty() || FindSetting(settings, "hostfile") ||
      FindSetting(settings, "host_discovery_script")) {
    return false;
  }
  absl::StatusOr<discovery::HostSet> parsed = discovery::ParseHostList(hosts->values.front(), 1);
  if (!parsed.ok() || parsed->empty()) return false;
  for (const discovery::HostSlots& host : *parsed) {
    if (!daemon::IsLoopbackHost(host.host)) return false;
  }
  return true;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return std::string(value != nullptr ? value : "");
  };
}

absl::StatusOr<SlurmChoice> ReadSlurmSettings(const RawSettings& settings, const EnvLookup& env,
                                              v1::JobSpec* spec) {
  const std::string job_id = env("SLURM_JOB_ID");
  // Inside an allocation srun is the default, except for -H naming only this machine
  // (`-H localhost:2` inside salloc), which runs here as it does with Horovod.
  std::string launcher = job_id.empty() || HostsAreThisMachine(settings) ? "" : "slurm";
  const RawSetting* launcher_setting = FindSetting(settings, "launcher");
  if (launcher_setting != nullptr) {
    launcher = launcher_setting->values.front();
    if (launcher != "slurm" && launcher != "ssh" && launcher != "local") {
      return InvalidSetting(*launcher_setting,
                            absl::StrCat("'", launcher, "' is not one of slurm, ssh, local"));
    }
  }
  SlurmChoice choice;
  const bool other_hosts = FindSetting(settings, "hosts") || FindSetting(settings, "hostfile") ||
                           FindSetting(settings, "host_discovery_script");
  if (const RawSetting* discovery = FindSetting(settings, "host_discovery")) {
    if (discovery->values.front() != "slurm") {
      return InvalidSetting(*discovery, absl::StrCat("'", discovery->values.front(),
                                                     "' is not a built-in discovery (slurm)"));
    }
    if (other_hosts) {
      return absl::InvalidArgumentError(absl::StrCat(discovery->origin,
                                                     " slurm cannot be used with -H, --hostfile or "
                                                     "--host-discovery-script"));
    }
    choice.explicit_discovery = true;
  }
  choice.slurm_discovery = choice.explicit_discovery || (launcher == "slurm" && !other_hosts);

  if (launcher == "slurm" || choice.slurm_discovery) {
    const std::string what = launcher == "slurm" ? "--launcher slurm" : "--host-discovery slurm";
    if (job_id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       " needs a Slurm allocation, and SLURM_JOB_ID is not set: run horovodrun "
                       "inside salloc or an sbatch script"));
    }
    if (!discovery::IsValidSlurmJobId(job_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_JOB_ID '", job_id, "' is not a Slurm job id"));
    }
    spec->mutable_slurm()->set_job_id(job_id);
    spec->mutable_slurm()->set_node_list(env("SLURM_JOB_NODELIST"));
    const std::string tasks = env("SLURM_TASKS_PER_NODE");
    if (!tasks.empty()) {
      HVDD_RETURN_IF_ERROR(discovery::ParseTasksPerNode(tasks).status());
    }
    spec->mutable_slurm()->set_tasks_per_node(tasks);
  }
  if (launcher == "slurm") spec->set_launcher(launcher);
  if (launcher == "local") spec->set_launcher(launcher);  // "ssh" is the default: left empty
  if (choice.slurm_discovery) {
    spec->mutable_discovery()->set_slurm(true);
    if (FindSetting(settings, "slots_per_host") == nullptr) {
      spec->mutable_discovery()->set_default_slots(0);  // the allocation's tasks per node
    }
  }
  return choice;
}

absl::Status CheckSlurmReachable(const v1::JobSpec& spec) {
  if (spec.launcher() != "slurm" && !spec.discovery().slurm()) return absl::OkStatus();
  if (spec.launcher() == "slurm" && discovery::FindInPath("srun").empty()) {
    return absl::FailedPreconditionError(
        "--launcher slurm: srun is not in PATH (is Slurm's client, slurm-client, installed "
        "here?)");
  }
  absl::StatusOr<discovery::SlurmJob> job = discovery::ShowSlurmJob(
      discovery::DefaultCommandRunner(kSlurmCheckTimeout), spec.slurm().job_id());
  if (!job.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Slurm does not answer for job ", spec.slurm().job_id(), ": ", job.status().message()));
  }
  if (job->state != "RUNNING") {
    return absl::FailedPreconditionError(
        absl::StrCat("Slurm job ", spec.slurm().job_id(), " is ", job->state, ", not RUNNING"));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::cli
