// ShimLauncher: shims on other hosts, reached over SSH (remote_shim_link.h),
// and what a restarted daemon gathers from all of a job's shims.
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/launch/shim_client/shim_launcher_internal.h"

namespace horovodd::daemon {

namespace {

// FNV-1a in 16 hex digits: the same in every build and run (std::hash and
// absl::Hash are not).
std::string NamespaceHash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  return hex;
}

}  // namespace

std::string ShimNamespaceOf(const std::string& socket_dir) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return NamespaceHash(absl::StrCat(host, ":", socket_dir));
}

std::string SharedShimNamespace(const std::string& cluster) {
  return NamespaceHash(absl::StrCat("shared:", cluster));
}

absl::StatusOr<ShimContents> MergeShimContents(std::vector<absl::StatusOr<ShimContents>> found,
                                               bool local_expected) {
  ShimContents all;
  std::optional<absl::Status> first_failure;
  bool any = false;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i].ok()) {
      if (!first_failure) first_failure = found[i].status();
      const bool quiet_local = i == 0 && !local_expected && absl::IsNotFound(found[i].status());
      if (!quiet_local) all.warnings.push_back(std::string(found[i].status().message()));
      continue;
    }
    ShimContents& one = *found[i];
    all.protocol_version =
        any ? std::min(all.protocol_version, one.protocol_version) : one.protocol_version;
    any = true;
    for (ReattachedWorker& worker : one.workers) all.workers.push_back(std::move(worker));
    if (all.worker_token.empty()) all.worker_token = one.worker_token;
    all.daemon_away = std::max(all.daemon_away, one.daemon_away);
    for (std::string& warning : one.warnings) all.warnings.push_back(std::move(warning));
  }
  if (!any) return *first_failure;
  return all;
}

absl::StatusOr<std::shared_ptr<ShimLauncher::Shim>> ShimLauncher::ConnectRemote(
    const ShimKey& key, const SshOptions& ssh, bool start, const std::string& daemon_address) {
  RemoteShimPlace place;
  place.host = key.second;
  place.ssh = ssh;
  place.job_id = key.first;
  place.shim_namespace = options_.remote_namespace;
  place.shim_binary = options_.remote_shim_binary;
  place.shim_flags = {"--idle-timeout-s",
                      absl::StrCat(absl::ToDoubleSeconds(options_.shim_idle_timeout))};
  if (options_.shim_buffered_lines > 0) {
    place.shim_flags.push_back("--buffered-lines");
    place.shim_flags.push_back(absl::StrCat(options_.shim_buffered_lines));
  }
  place.timeout = options_.remote_timeout;
  HVDD_ASSIGN_OR_RETURN(std::unique_ptr<RemoteShimLink> link, RemoteShimLink::Open(place, start));
  auto shim = std::make_shared<Shim>();
  shim->key = key;
  shim->fd.Reset(fcntl(link->fd(), F_DUPFD_CLOEXEC, 0));
  if (!shim->fd.valid()) return absl::InternalError("cannot duplicate the shim link's socket");
  if (start) {
    // A daemon on loopback is out of the host's reach: the workers get a
    // port on their own host that leads back through this link.
    if (std::optional<LoopbackAddress> daemon = ParseLoopbackAddress(daemon_address)) {
      HVDD_ASSIGN_OR_RETURN(shim->workers_daemon_address, link->OpenTunnel(*daemon, 0));
    }
  }
  shim->link = std::move(link);
  HVDD_RETURN_IF_ERROR(shim->SendHello());
  return shim;
}

absl::Status ShimLauncher::ReopenTunnel(Shim& shim, const std::string& workers_address,
                                        const std::string& daemon_address) {
  std::optional<LoopbackAddress> daemon = ParseLoopbackAddress(daemon_address);
  std::optional<LoopbackAddress> on_host = ParseLoopbackAddress(workers_address);
  if (!daemon || !on_host) return absl::OkStatus();  // the workers dial the daemon directly
  const absl::Time deadline = absl::Now() + options_.tunnel_reclaim_timeout;
  absl::StatusOr<std::string> opened = shim.link->OpenTunnel(*daemon, on_host->port);
  for (bool told = false; absl::IsUnavailable(opened.status()) && absl::Now() < deadline;) {
    if (!told) {
      HVDD_LOG(WARNING) << "job " << shim.key.first << shim.where() << ": "
                        << opened.status().message() << "; asking again for up to "
                        << absl::FormatDuration(options_.tunnel_reclaim_timeout)
                        << " (a vanished daemon's SSH connection holds the port until the "
                           "host's sshd drops it)";
      told = true;
    }
    absl::SleepFor(absl::Milliseconds(500));
    opened = shim.link->OpenTunnel(*daemon, on_host->port);
  }
  if (!opened.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the workers of job ", shim.key.first, shim.where(),
                     " cannot get back to the daemon: ", opened.status().message()));
  }
  shim.workers_daemon_address = *opened;
  return absl::OkStatus();
}

}  // namespace horovodd::daemon
