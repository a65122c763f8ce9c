// DaemonServer::StandBy: a horovodd of an HA setup (an etcd store) before it
// leads. It listens at once, serving JobService as a standby, and campaigns
// until its lease holds the leader key; then its listener goes, and Start
// serves on the same port as the leader.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/auth/tls_credentials.h"
#include "daemon/service/daemon_server.h"
#include "daemon/standby/standby_job_service.h"

namespace horovodd::daemon {

namespace {

bool StopSignalPending() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "[::]";
}

// How a standby dials the leader: as the workers do (the CA they are given,
// and their certificate under mutual TLS), or plaintext.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LeaderCredentials(
    const TlsSettings& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  const std::string& ca = tls.worker_ca_file.empty() ? tls.client_ca_file : tls.worker_ca_file;
  if (!ca.empty()) {
    HVDD_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(ca, "tls.worker_ca_file"));
  }
  if (!tls.worker_cert_file.empty() && !tls.worker_key_file.empty()) {
    HVDD_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                          ReadPemFile(tls.worker_cert_file, "tls.worker_cert_file"));
    HVDD_ASSIGN_OR_RETURN(ssl.pem_private_key,
                          ReadPemFile(tls.worker_key_file, "tls.worker_key_file"));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<Leadership> DaemonServer::StandBy(
    const DaemonOptions& options, const std::function<void(const std::string&)>& on_listening) {
  Leadership leadership;
  EtcdOptions etcd;
  HVDD_ASSIGN_OR_RETURN(etcd.endpoints, ParseEtcdUrl(options.store));
  etcd.ca_file = options.etcd.ca_file;
  etcd.cert_file = options.etcd.cert_file;
  etcd.key_file = options.etcd.key_file;
  HVDD_ASSIGN_OR_RETURN(leadership.etcd, EtcdClient::Create(etcd));

  const std::string& listen = options.listen_address;
  absl::StatusOr<HostPort> address = ParseHostPort(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen address ", address.status().message()));
  }
  HVDD_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(options.tls, address->host));
  HVDD_ASSIGN_OR_RETURN(auto leader_credentials, LeaderCredentials(options.tls));

  // Listens before campaigning: the port (when 0 was asked for) is part of
  // the address published while this daemon leads.
  std::atomic<bool> stop_asked{false};
  std::function<void()> stop;
  if (options.stoppable_over_rpc) stop = [&stop_asked] { stop_asked = true; };
  StandbyJobService service(leader_credentials, std::move(stop));
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  leadership.listen_address = absl::StrCat(address->host, ":", port);
  std::string host = address->host;
  if (IsWildcardHost(host)) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    host = name;
  }
  const std::string advertised =
      options.etcd.advertise.empty() ? absl::StrCat(host, ":", port) : options.etcd.advertise;
  service.SetSelf(advertised);

  LeaderElectionOptions election;
  election.key = options.etcd.prefix + "leader";
  election.address = advertised;
  election.lease_ttl = options.etcd.lease_ttl;
  // A daemon deposed exits (75) and comes back as a standby (systemd's Restart=).
  election.campaign_after_deposed = false;
  leadership.gate = std::make_shared<DecisionGate>();
  election.gate = leadership.gate;
  leadership.election = std::make_unique<LeaderElection>(leadership.etcd, election);
  leadership.loss = std::make_shared<LeadershipLoss>();

  std::string announced = "-";
  while (true) {
    absl::StatusOr<bool> leads = leadership.election->TryLead();
    if (leads.ok() && *leads) break;
    std::string leader;
    if (!leads.ok()) {
      if (announced != leads.status().message()) {
        HVDD_LOG(WARNING) << "standby: cannot campaign: " << leads.status().message();
        announced = std::string(leads.status().message());
      }
    } else if (absl::StatusOr<std::string> current = leadership.election->Leader(); current.ok()) {
      leader = *current;
      if (leader != announced) {
        if (leader.empty()) {
          HVDD_LOG(INFO) << "standby: no leader; campaigning";
        } else {
          HVDD_LOG(INFO) << "standby: " << leader << " leads; taking over when its lease ("
                         << absl::FormatDuration(options.etcd.lease_ttl) << ") ends";
        }
        announced = leader;
      }
    }
    service.SetLeader(leader);
    if (!leadership.stood_by) {
      leadership.stood_by = true;
      HVDD_LOG(INFO) << "standby on " << advertised
                     << " (reads forwarded to the leader, writes "
                        "refused naming it)";
      if (on_listening)
        on_listening(
            absl::StrCat(IsWildcardHost(address->host) ? "127.0.0.1" : address->host, ":", port));
    }
    if (StopSignalPending() || stop_asked) {
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      return absl::CancelledError("stopped while standing by for the leadership");
    }
    absl::SleepFor(election.campaign_interval);
  }
  // The lease is renewed from now on, through the recovery and the shims'
  // reattachment, which may take longer than its TTL.
  leadership.election->Run(nullptr, [loss = leadership.loss] { loss->Report(); });
  HVDD_LOG(INFO) << "leading: " << election.key << " in " << leadership.etcd->Describe()
                 << " holds " << advertised;
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return leadership;
}

}  // namespace horovodd::daemon
