// How a job's spec says its workers are reached (--launcher, the --ssh-*
// flags, the Slurm allocation), as the route every launch of the job carries.
// The job's launches (WorkerStarter, worker_starter.h) and the daemon's
// reattaching to remote shims after a restart (service/daemon_server.cc)
// read it the same way.
#pragma once

#include <memory>
#include <utility>

#include "daemon/launch/launcher.h"
#include "daemon/launch/slurm/slurm_launcher.h"
#include "daemon/launch/ssh/ssh_options.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// The job's --launcher ("" and "ssh": by host) and its launcher's options.
inline JobRoute JobRouteOf(const v1::JobSpec& spec) {
  JobRoute route;
  if (spec.launcher() == "local") {
    route.kind = LaunchRoute::kLocal;
    return route;
  }
  if (spec.launcher() == "slurm") {
    auto slurm = std::make_shared<SlurmStepOptions>();
    slurm->job_id = spec.slurm().job_id();
    route.kind = LaunchRoute::kSlurm;
    route.options = std::move(slurm);
    return route;
  }
  // How the job reaches hosts that are not this machine.
  const v1::SshSpec& given = spec.ssh();
  auto ssh = std::make_shared<SshOptions>();
  if (given.port() > 0) ssh->port = given.port();
  ssh->user = given.user();
  ssh->identity_file = given.identity_file();
  ssh->known_hosts_file = given.known_hosts_file();
  if (given.host_key_checking() == "strict") {
    ssh->host_key_checking = SshOptions::HostKeyChecking::kStrict;
  } else if (given.host_key_checking() == "off") {
    ssh->host_key_checking = SshOptions::HostKeyChecking::kOff;
  }  // else the default, accept-new
  route.options = std::move(ssh);
  return route;
}

}  // namespace horovodd::daemon
