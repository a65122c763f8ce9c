#include "daemon/job/worker_starter.h"

#include <csignal>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_join.h"
#include "daemon/job/launch_options.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/stall/stall_settings.h"

extern char** environ;

namespace horovodd::daemon {

WorkerStarter::WorkerStarter(const JobContext& context, const v1::JobSpec& spec, EventLoop& loop,
                             EventLog& events, BindAddresses& bind_addresses, ExitHandler on_exit,
                             LaunchedHandler on_launched)
    : context_(context),
      spec_(spec),
      loop_(loop),
      events_(events),
      bind_addresses_(bind_addresses),
      on_exit_(std::move(on_exit)),
      on_launched_(std::move(on_launched)) {}

void WorkerStarter::PlanRanks(const Plan& plan) {
  std::vector<std::string> hosts_by_rank;
  hosts_by_rank.reserve(plan.size());
  for (const Member& m : plan.survivors) hosts_by_rank.push_back(m.host);
  for (const Member& m : plan.promoted) hosts_by_rank.push_back(m.host);
  hosts_by_rank.insert(hosts_by_rank.end(), plan.new_hosts.begin(), plan.new_hosts.end());
  planned_ranks_ = AssignRanks(hosts_by_rank);
}

const std::map<std::string, std::string>& WorkerStarter::JobEnvironment() {
  if (job_environment_.has_value()) return *job_environment_;
  std::map<std::string, std::string>& env = job_environment_.emplace();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  // The admin credentials of whoever started the daemon are not the workers'.
  env.erase("HOROVODD_TOKEN");
  env.erase("HOROVODD_TOKEN_FILE");
  // Horovod's launcher sets it too: a Python worker's lines reach horovodrun
  // as they are printed, not when a buffer fills. The user's --env may unset it.
  env["PYTHONUNBUFFERED"] = "1";
  for (const auto& [k, v] : spec_.env()) env[k] = v;
  for (const auto& [k, v] : context_.worker_env) env[k] = v;  // TLS files
  env["HOROVODD_WORKER_TOKEN"] = context_.worker_token;       // environment only, never argv
  env[kDaemonAddressVariable] = context_.daemon_address;
  env["HOROVODD_JOB_ID"] = context_.job_id;
  // The worker binds its rings to this interface's address on its own host.
  std::vector<std::string> interfaces(spec_.network_interfaces().begin(),
                                      spec_.network_interfaces().end());
  if (interfaces.empty() && !spec_.network_interface().empty()) {
    interfaces.push_back(spec_.network_interface());  // a client older than the list
  }
  if (!interfaces.empty()) {
    env["HOROVODD_NETWORK_INTERFACE"] =
        spec_.network_interface().empty() ? interfaces.front() : spec_.network_interface();
    // Horovod's names: Gloo takes one interface, NCCL the list.
    env["HOROVOD_GLOO_IFACE"] = env["HOROVODD_NETWORK_INTERFACE"];
    env["NCCL_SOCKET_IFNAME"] = absl::StrJoin(interfaces, ",");
  }
  env["HOROVOD_ELASTIC"] = spec_.elastic() ? "1" : "0";
  // The daemon names and acts on stalls (daemon/stall/): the workers' own
  // check only warns.
  if (StallSettings::ForJob(spec_, [](const char* name) { return std::getenv(name); }).enabled) {
    env[StallSettings::kDaemonActsVariable] = "1";
  }
  env["HOROVOD_CONTROLLER"] = "gloo";
  env["HOROVOD_CPU_OPERATIONS"] = "gloo";
  return env;
}

std::map<std::string, std::string> WorkerStarter::Environment(const Worker& w, int planned_rank) {
  std::map<std::string, std::string> env = JobEnvironment();
  env["HOROVODD_WORKER_ID"] = std::to_string(w.id);
  env["HOROVOD_HOSTNAME"] = w.host;
  // What the plan gives this worker, as Horovod's launcher sets it at spawn: scripts read
  // HOROVOD_SIZE and friends before init(). The runtime sets them again at each rendezvous.
  RankInfo planned;
  if (planned_rank >= 0 && planned_rank < static_cast<int>(planned_ranks_.size())) {
    planned = planned_ranks_[planned_rank];
  } else {  // not planned by PlanRanks (cannot happen today): a rank of its own
    planned.rank = planned_rank;
    planned.size = planned_rank + 1;
    planned.local_size = planned.cross_size = 1;
  }
  env["HOROVOD_RANK"] = std::to_string(planned_rank);
  env["HOROVOD_SIZE"] = std::to_string(planned.size);
  env["HOROVOD_LOCAL_RANK"] = std::to_string(planned.local_rank);
  env["HOROVOD_LOCAL_SIZE"] = std::to_string(planned.local_size);
  env["HOROVOD_CROSS_RANK"] = std::to_string(planned.cross_rank);
  env["HOROVOD_CROSS_SIZE"] = std::to_string(planned.cross_size);
  // A hot spare learns its rank when a generation takes it (JobSpec.hot_spares).
  if (IsSpare(w)) env["HOROVODD_SPARE"] = "1";
  return env;
}

std::optional<absl::StatusOr<LaunchedProcess>> WorkerStarter::Launch(const Worker& w,
                                                                     int planned_rank) {
  WorkerLaunch launch;
  launch.host = w.host;
  launch.spec.argv.assign(spec_.argv().begin(), spec_.argv().end());
  launch.spec.env = Environment(w, planned_rank);
  launch.spec.working_dir = spec_.working_dir();
  launch.route = JobRouteOf(spec_);
  ProcessCallbacks callbacks = CallbacksFor(w);
  // Remote and Slurm launches wait on other machines (sshd, slurmctld): off the loop.
  if (LaunchesHere(launch)) {
    launch.spec.env["HOROVODD_BIND_ADDR"] = bind_addresses_.For(w.host);  // a local name
    return context_.launcher->Launch(launch, std::move(callbacks));
  }
  pool_.Submit(
      [this, id = w.id, launch = std::move(launch), callbacks = std::move(callbacks)]() mutable {
        // A name lookup, which may wait on DNS: here rather than on the loop,
        // whose rendezvous answers then find the host's address looked up.
        launch.spec.env["HOROVODD_BIND_ADDR"] = bind_addresses_.For(launch.host);
        Launcher* launcher = context_.launcher;
        absl::StatusOr<LaunchedProcess> launched = launcher->Launch(launch, std::move(callbacks));
        if (!loop_.Post([this, id, launched] { on_launched_(id, launched); }) && launched.ok()) {
          // The job is going away: nobody else would ever stop this process.
          launcher->Signal(launched->handle, SIGKILL).IgnoreError();
        }
      });
  return std::nullopt;
}

bool WorkerStarter::FailsEverywhere(const absl::Status& failure, bool on_loop) const {
  const absl::StatusCode code = failure.code();
  if (on_loop) {
    // The command itself cannot run: it will not on another slot either.
    return code == absl::StatusCode::kNotFound || code == absl::StatusCode::kPermissionDenied ||
           code == absl::StatusCode::kInvalidArgument;
  }
  // No srun, or no allocation: no node will do better.
  return spec_.launcher() == "slurm" && (code == absl::StatusCode::kFailedPrecondition ||
                                         code == absl::StatusCode::kInvalidArgument);
}

ProcessCallbacks WorkerStarter::CallbacksFor(const Worker& w) {
  ProcessCallbacks callbacks;
  callbacks.on_line = WorkerTable::OutputSink(w, &events_);
  callbacks.on_exit = [this, id = w.id](const ExitInfo& exit) {
    loop_.Post([this, id, exit, at = loop_.clock().Now()] { on_exit_(id, exit, at); });
  };
  return callbacks;
}

void WorkerStarter::Shutdown() { pool_.Shutdown(); }

}  // namespace horovodd::daemon
