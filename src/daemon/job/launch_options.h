// How a job's spec says its workers are reached: the --ssh-* flags and the
// --launcher route. The job's launches (WorkerStarter, worker_starter.h) and
// the daemon's reattaching to remote shims after a restart
// (service/daemon_server.cc) read them the same way.
#pragma once

#include "daemon/launch/launcher.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// How the job reaches hosts that are not this machine (horovodrun's --ssh-*).
inline SshOptions SshOptionsOf(const v1::SshSpec& ssh) {
  SshOptions options;
  if (ssh.port() > 0) options.port = ssh.port();
  options.user = ssh.user();
  options.identity_file = ssh.identity_file();
  options.known_hosts_file = ssh.known_hosts_file();
  if (ssh.host_key_checking() == "strict") {
    options.host_key_checking = SshOptions::HostKeyChecking::kStrict;
  } else if (ssh.host_key_checking() == "off") {
    options.host_key_checking = SshOptions::HostKeyChecking::kOff;
  }  // else the default, accept-new
  return options;
}

// The job's --launcher ("" and "ssh": by host).
inline LaunchRoute RouteOf(const v1::JobSpec& spec) {
  if (spec.launcher() == "local") return LaunchRoute::kLocal;
  if (spec.launcher() == "slurm") return LaunchRoute::kSlurm;
  return LaunchRoute::kByHost;
}

}  // namespace horovodd::daemon
