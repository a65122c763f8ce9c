#include "discovery/slurm_host_source.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "discovery/slurm_parser.h"

namespace horovodd::discovery {
namespace {

class SlurmHostSource : public HostSource {
 public:
  explicit SlurmHostSource(SlurmHostSourceOptions options) : options_(std::move(options)) {
    if (!options_.run) options_.run = DefaultCommandRunner(options_.timeout);
  }

  absl::StatusOr<HostSet> Discover() override {
    absl::StatusOr<SlurmJob> job = ShowSlurmJob(options_.run, options_.job_id);
    if (absl::IsNotFound(job.status()) &&
        job.status().message().find("is gone") != absl::string_view::npos) {
      return HostSet{};  // the allocation is over: so are its nodes
    }
    HVDD_RETURN_IF_ERROR(job.status());
    // Only a running job has nodes to run on (a suspended one keeps them, but
    // nothing may run there until it resumes).
    if (job->state != "RUNNING" || job->node_list.empty() || job->node_list == "(null)") {
      return HostSet{};
    }
    HVDD_ASSIGN_OR_RETURN(const auto& slots, SlotsPerNode());
    HVDD_ASSIGN_OR_RETURN(std::vector<SlurmNode> nodes,
                          ShowSlurmNodes(options_.run, job->node_list));
    HostSet hosts;
    for (const SlurmNode& node : nodes) {
      if (!SlurmNodeUsable(node.state)) continue;
      int n = options_.slots_per_host;
      if (n <= 0) {
        auto it = slots.find(node.name);
        n = it != slots.end() ? it->second : 1;
      }
      hosts.push_back({node.name, n});
    }
    std::sort(hosts.begin(), hosts.end(),
              [](const HostSlots& a, const HostSlots& b) { return a.host < b.host; });
    hosts.erase(
        std::unique(hosts.begin(), hosts.end(),
                    [](const HostSlots& a, const HostSlots& b) { return a.host == b.host; }),
        hosts.end());
    return hosts;
  }

  std::string Describe() const override { return absl::StrCat("Slurm job ", options_.job_id); }

 private:
  // The submission's tasks per node, by node name; worked out once.
  absl::StatusOr<std::map<std::string, int>> SlotsPerNode() {
    if (slots_) return *slots_;
    std::map<std::string, int> slots;
    if (options_.slots_per_host <= 0 && !options_.tasks_per_node.empty()) {
      HVDD_ASSIGN_OR_RETURN(std::vector<int> counts, ParseTasksPerNode(options_.tasks_per_node));
      HVDD_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            ExpandSlurmHostlist(options_.run, options_.node_list));
      if (names.size() != counts.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SLURM_TASKS_PER_NODE '", options_.tasks_per_node, "' counts ", counts.size(),
            " nodes, SLURM_JOB_NODELIST '", options_.node_list, "' has ", names.size()));
      }
      for (size_t i = 0; i < names.size(); ++i) slots[names[i]] = counts[i];
    }
    slots_ = std::move(slots);
    return *slots_;
  }

  SlurmHostSourceOptions options_;
  std::optional<std::map<std::string, int>> slots_;
};

}  // namespace

std::unique_ptr<HostSource> MakeSlurmHostSource(SlurmHostSourceOptions options) {
  return std::make_unique<SlurmHostSource>(std::move(options));
}

}  // namespace horovodd::discovery
