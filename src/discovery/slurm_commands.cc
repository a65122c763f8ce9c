#include "discovery/slurm_commands.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "discovery/script_runner.h"

namespace horovodd::discovery {

CommandRunner DefaultCommandRunner(absl::Duration timeout) {
  return [timeout](const std::vector<std::string>& argv) { return RunCommand(argv, timeout); };
}

absl::StatusOr<SlurmJob> ShowSlurmJob(const CommandRunner& run, const std::string& job_id) {
  if (!IsValidSlurmJobId(job_id)) {
    return absl::InvalidArgumentError(absl::StrCat("'", job_id, "' is not a Slurm job id"));
  }
  absl::StatusOr<std::string> out = run({"scontrol", "-o", "show", "job", job_id});
  if (!out.ok()) {
    // scontrol's words for a job it has forgotten (ended, then purged after MinJobAge).
    if (absl::StrContains(out.status().message(), "Invalid job id")) {
      return absl::NotFoundError(
          absl::StrCat("Slurm job ", job_id, " is gone: ", out.status().message()));
    }
    return out.status();
  }
  return ParseScontrolJob(*out);
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(const CommandRunner& run,
                                                             const std::string& list) {
  HVDD_ASSIGN_OR_RETURN(std::string out, run({"scontrol", "show", "hostnames", list}));
  return std::vector<std::string>(
      absl::StrSplit(out, absl::ByAnyChar("\n \t"), absl::SkipWhitespace()));
}

absl::StatusOr<std::vector<SlurmNode>> ShowSlurmNodes(const CommandRunner& run,
                                                      const std::string& list) {
  HVDD_ASSIGN_OR_RETURN(std::string out, run({"scontrol", "-o", "show", "node", list}));
  return ParseScontrolNodes(out);
}

}  // namespace horovodd::discovery
