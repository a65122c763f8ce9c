#include "daemon/launch/launcher.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/launch/local_launcher.h"

namespace horovodd::daemon {

bool IsLocalHost(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && host == name) return true;
  return false;
}

absl::StatusOr<LaunchedProcess> LocalProcessLauncher::Launch(const WorkerLaunch& launch,
                                                             ProcessCallbacks callbacks) {
  HVDD_ASSIGN_OR_RETURN(auto pid, local_->Launch(launch.spec, std::move(callbacks)));
  return LaunchedProcess{pid, pid};
}

absl::Status LocalProcessLauncher::Signal(int64_t handle, int sig) {
  return local_->Signal(static_cast<pid_t>(handle), sig);
}

absl::StatusOr<LaunchedProcess> HostRouter::Launch(const WorkerLaunch& launch,
                                                   ProcessCallbacks callbacks) {
  Launcher* other = remote_;
  if (launch.route == LaunchRoute::kSlurm) {
    other = slurm_;
    if (other == nullptr) {
      return absl::UnimplementedError("this daemon cannot start Slurm steps");
    }
  } else if (launch.route == LaunchRoute::kLocal || IsLocalHost(launch.host)) {
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

}  // namespace horovodd::daemon
