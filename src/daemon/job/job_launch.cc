// JobDriver: launching workers, locally on the loop thread, remotely on the
// job's launch pool (launch_pool.h), and what comes of a remote launch.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/job/job_driver.h"
#include "daemon/job/launch_options.h"

extern char** environ;

namespace horovodd::daemon {

// The address a worker on `host` binds its rings to.
std::string BindAddressFor(const std::string& host) {
  if (host == "localhost") return "127.0.0.1";
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  std::string out = host;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) == 0 && result != nullptr) {
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(result->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) out = buf;
    freeaddrinfo(result);
  }
  return out;
}

void JobDriver::PlanRanks(const Plan& plan) {
  std::vector<std::string> hosts_by_rank;
  hosts_by_rank.reserve(plan.size());
  for (const Member& m : plan.survivors) hosts_by_rank.push_back(m.host);
  hosts_by_rank.insert(hosts_by_rank.end(), plan.new_hosts.begin(), plan.new_hosts.end());
  planned_ranks_ = AssignRanks(hosts_by_rank);
}

std::map<std::string, std::string> JobDriver::WorkerEnvironment(const Worker& w,
                                                                 int planned_rank) const {
  std::map<std::string, std::string> env;
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
  env["HOROVODD_WORKER_TOKEN"] = context_.worker_token;  // environment only, never argv
  env[kDaemonAddressVariable] = context_.daemon_address;
  env["HOROVODD_JOB_ID"] = context_.job_id;
  env["HOROVODD_WORKER_ID"] = std::to_string(w.id);
  env["HOROVODD_BIND_ADDR"] = BindAddressFor(w.host);
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
  env["HOROVOD_HOSTNAME"] = w.host;
  env["HOROVOD_ELASTIC"] = spec_.elastic() ? "1" : "0";
  env["HOROVOD_CONTROLLER"] = "gloo";
  env["HOROVOD_CPU_OPERATIONS"] = "gloo";
  // What the plan gives this worker, as Horovod's launcher sets it at spawn: scripts read
  // HOROVOD_SIZE and friends before init(). The runtime sets them again at each rendezvous.
  RankInfo planned;
  if (planned_rank >= 0 && planned_rank < static_cast<int>(planned_ranks_.size())) {
    planned = planned_ranks_[planned_rank];
  } else {  // not planned by Replan (cannot happen today): a rank of its own
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
  return env;
}

void JobDriver::LaunchWorker(const std::string& host, int planned_rank) {
  Worker& w = workers_.Add(host, planned_rank);
  const int64_t id = w.id;
  liveness_.Launched(id, Now());
  WorkerLaunch launch;
  launch.host = host;
  launch.spec.argv.assign(spec_.argv().begin(), spec_.argv().end());
  launch.spec.env = WorkerEnvironment(w, planned_rank);
  launch.spec.working_dir = spec_.working_dir();
  launch.ssh = SshOptionsOf(spec_.ssh());
  launch.route = RouteOf(spec_);
  launch.slurm_job_id = spec_.slurm().job_id();
  ProcessCallbacks callbacks;
  callbacks.on_line = WorkerTable::OutputSink(w, &events_);
  callbacks.on_exit = [this, id](const ExitInfo& exit) {
    loop_.Post([this, id, exit] { OnWorkerExit(id, exit); });
  };
  // Remote and Slurm launches wait on other machines (sshd, slurmctld): off the loop.
  const bool on_loop = launch.route == LaunchRoute::kLocal ||
                       (launch.route == LaunchRoute::kByHost && IsLocalHost(host));
  if (!on_loop) {
    // A member from now on, as a local worker would be; the generation
    // waits for it as for any member that has not joined yet.
    w.launching = true;
    generations_.AddMember(id);
    launches_.Submit([this, id, launch = std::move(launch),
                      callbacks = std::move(callbacks)]() mutable {
      Launcher* launcher = context_.launcher;
      absl::StatusOr<LaunchedProcess> launched = launcher->Launch(launch, std::move(callbacks));
      if (!loop_.Post([this, id, launched] { OnRemoteLaunched(id, launched); }) &&
          launched.ok()) {
        // The job is going away: nobody else would ever stop this process.
        launcher->Signal(launched->handle, SIGKILL).IgnoreError();
      }
    });
    return;
  }
  auto launched = context_.launcher->Launch(launch, std::move(callbacks));
  if (!launched.ok()) {
    // Never started: as if it had never been planned.
    liveness_.Forget(id);
    workers_.Erase(id);
    const auto code = launched.status().code();
    if (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kPermissionDenied ||
        code == absl::StatusCode::kInvalidArgument) {
      // The command itself cannot run: it will not on another slot either.
      Finish(v1::FAILED, absl::StrCat("cannot start workers: ", launched.status().message()));
      return;
    }
    OnHostLaunchFailure(host, launched.status());
    return;
  }
  WorkerTable::Started(w, *launched);
  Event(v1::JobEvent::INFO, absl::StrCat("started worker ", id, " on ", host, " (pid ",
                                         w.pid, ")"));
  generations_.AddMember(id);
}

void JobDriver::OnHostLaunchFailure(const std::string& host, const absl::Status& status) {
  // The host is the problem (unreachable, refused): it sits out a cooldown
  // and the job goes on with the others.
  const std::string why(status.message());
  hosts_.ReportFailure(host, why, Now());
  Event(v1::JobEvent::WARNING,
        absl::StrCat("cannot start a worker on ", host, ": ", why, "; host in cooldown"),
        "launch_failed");
  ScheduleCooldownWakeup();
  loop_.Post([this] {
    Replan("a worker could not be started", ReplanTrigger::kMembershipChange);
  });
}

void JobDriver::OnRemoteLaunched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched) {
  Worker* w = workers_.Find(id);
  if (w == nullptr) return;
  if (!w->launching) {
    // It already exited (its on_exit overtook this): only the pid is news.
    if (launched.ok()) w->pid = launched->pid;
    return;
  }
  w->launching = false;
  if (!launched.ok()) {
    // Never started: the job goes on as if it had never been planned.
    const std::string host = w->host;
    generations_.RemoveMember(id);
    liveness_.Forget(id);
    workers_.Erase(id);
    if (Terminal()) {
      MaybeCloseLog();
      return;
    }
    if (spec_.launcher() == "slurm" &&
        (launched.status().code() == absl::StatusCode::kFailedPrecondition ||
         launched.status().code() == absl::StatusCode::kInvalidArgument)) {
      // No srun, or no allocation: no node will do better.
      Finish(v1::FAILED, absl::StrCat("cannot start workers: ", launched.status().message()));
      return;
    }
    OnHostLaunchFailure(host, launched.status());
    if (finishing_) {
      MaybeFinishSucceeded(generations_.ready_generation() == 0 ? Finishers::kPlannedMembers
                                                                : Finishers::kReadyMembers);
    }
    NotifyOnceJoinersWait();
    TryCompleteRendezvous();
    return;
  }
  WorkerTable::Started(*w, *launched);
  Event(v1::JobEvent::INFO, absl::StrCat("started worker ", id, " on ", w->host, " (pid ",
                                         w->pid, ")"));
  // What happened to it while it was starting, the others already had.
  if (Terminal() || !w->lost_reason.empty()) {
    context_.launcher->Signal(w->handle, SIGKILL).IgnoreError();
  } else if (w->state == v1::WORKER_REMOVED) {
    context_.launcher->Signal(w->handle, SIGTERM).IgnoreError();
  }
}

}  // namespace horovodd::daemon
