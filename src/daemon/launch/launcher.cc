#include "daemon/launch/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::daemon {

bool IsLocalHost(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && host == name) return true;
  return false;
}

bool LaunchesHere(const WorkerLaunch& launch) {
  return launch.route.kind == LaunchRoute::kLocal ||
         (launch.route.kind == LaunchRoute::kByHost && IsLocalHost(launch.host));
}

namespace {

// The launchers given, each once, nulls left out, in their order.
std::vector<Launcher*> Distinct(std::initializer_list<Launcher*> launchers) {
  std::vector<Launcher*> distinct;
  for (Launcher* launcher : launchers) {
    if (launcher != nullptr &&
        std::find(distinct.begin(), distinct.end(), launcher) == distinct.end()) {
      distinct.push_back(launcher);
    }
  }
  return distinct;
}

}  // namespace

HostRouter::HostRouter(Launcher* local, Launcher* remote, Launcher* slurm)
    : local_(local),
      remote_(remote),
      slurm_(slurm),
      // The Slurm launcher first: its srun processes are another one's children.
      launchers_(Distinct({slurm, local, remote})) {}

absl::StatusOr<LaunchedProcess> HostRouter::Launch(const WorkerLaunch& launch,
                                                   ProcessCallbacks callbacks) {
  Launcher* other = remote_;
  if (launch.route.kind == LaunchRoute::kSlurm) {
    other = slurm_;
    if (other == nullptr) {
      return absl::UnimplementedError("this daemon cannot start Slurm steps");
    }
  } else if (LaunchesHere(launch)) {
    return local_->Launch(launch, std::move(callbacks));
  }
  if (other == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "host '", launch.host, "' is not this machine, and this daemon cannot launch remotely"));
  }
  HVDD_ASSIGN_OR_RETURN(auto remote, other->Launch(launch, std::move(callbacks)));
  absl::MutexLock lock(&mu_);
  const int64_t handle = next_remote_handle_--;
  remote_handles_[handle] = {other, remote.handle};
  return LaunchedProcess{handle, remote.pid};
}

absl::Status HostRouter::Signal(int64_t handle, int sig) {
  if (handle > 0) return local_->Signal(handle, sig);
  std::pair<Launcher*, int64_t> remote;
  {
    absl::MutexLock lock(&mu_);
    auto it = remote_handles_.find(handle);
    if (it == remote_handles_.end()) return absl::NotFoundError("no such process");
    remote = it->second;
  }
  return remote.first->Signal(remote.second, sig);
}

void HostRouter::TerminateAll(absl::Duration grace) {
  for (Launcher* launcher : launchers_) launcher->TerminateAll(grace);
}

bool HostRouter::DetachAll() {
  bool detached = true;
  for (Launcher* launcher : launchers_) detached = launcher->DetachAll() && detached;
  return detached;
}

size_t HostRouter::running() const {
  size_t count = 0;
  for (const Launcher* launcher : launchers_) count += launcher->running();
  return count;
}

}  // namespace horovodd::daemon
