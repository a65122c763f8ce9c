#include "daemon/service/daemon_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/status_macros.h"
#include "daemon/auth/auth_token.h"
#include "daemon/auth/tls_credentials.h"
#include "daemon/etcd_client/etcd_client.h"
#include "daemon/etcd_journal/etcd_journal.h"
#include "daemon/job/launch_options.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/launch/shim_client/shim_launcher.h"
#include "daemon/launch/slurm/slurm_launcher.h"
#include "daemon/launch/ssh/ssh_launcher.h"
#include "daemon/metrics/metrics_interceptor.h"
#include "daemon/rpc/guarded_job_service.h"
#include "daemon/rpc/job_limits.h"
#include "daemon/rpc/job_service.h"
#include "daemon/rpc/worker_service.h"

namespace horovodd::daemon {
namespace {

// Health checking and reflection are process-wide gRPC switches that every
// ServerBuilder made afterwards picks up.
void EnableHealthAndReflection() {
  static std::once_flag once;
  std::call_once(once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
}

// Lets a job's shim go once the job has ended (all its exits delivered).
class ShimCloser final : public JobObserver {
 public:
  explicit ShimCloser(ShimLauncher* shims) : shims_(shims) {}
  void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus&) override {
    shims_->Close(job_id);
  }

 private:
  ShimLauncher* const shims_;
};

// The address workers were given for a daemon listening on `listen` with a
// fixed port ("" when the port is picked at start: nothing to come back to).
std::string FixedWorkerAddress(const std::string& listen) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen);
  if (!parsed.ok() || parsed->port == 0) return "";
  std::string host = parsed->host;
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", parsed->port);
}

// The remote hosts whose shims held the job's workers (none for a job of
// --launcher local or slurm: its workers' shim is this machine's).
std::vector<RemoteShimHost> RemoteShimHostsOf(const ResumableJob& job) {
  std::vector<RemoteShimHost> hosts;
  const JobRoute route = JobRouteOf(job.spec);
  if (route.kind != LaunchRoute::kByHost) return hosts;
  std::set<std::string> seen;
  for (const v1::WorkerStatus& worker : job.checkpoint.status.workers()) {
    if (IsLocalHost(worker.host()) || !seen.insert(worker.host()).second) continue;
    hosts.push_back({worker.host(), SshOptionsIn(route)});
  }
  return hosts;
}

// Where the shims live on the workers' hosts with an etcd store: named by
// the etcd cluster's id and the prefix, which every daemon of one setup
// shares however its config names the members (by address or name, in any
// order, each host through its own route), so a new leader finds the shims
// another started.
absl::StatusOr<std::string> EtcdShimNamespace(EtcdClient& etcd, const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix + "leader");
  request.set_count_only(true);
  absl::StatusOr<etcdserverpb::RangeResponse> response = etcd.Range(request);
  if (!response.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the etcd cluster's id (it names the "
                     "shims' dir on the workers' hosts): ",
                     response.status().message()));
  }
  return SharedShimNamespace(
      absl::StrCat("etcd-cluster-", absl::Hex(response->header().cluster_id()), ":", prefix));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(const DaemonOptions& given,
                                                                  Leadership leadership) {
  DaemonOptions options = given;
  // A leader serves where it stood by: the port it was advertised on.
  if (!leadership.listen_address.empty()) options.listen_address = leadership.listen_address;
  // Debian's Abseil is built with Mutex deadlock detection on: it records
  // every lock order in a global graph (gRPC locks absl::Mutex on each call),
  // which costs the daemon dearly under load. It is a debugging aid; off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<DaemonServer> daemon(new DaemonServer());
  daemon->etcd_ = std::move(leadership.etcd);
  daemon->election_ = std::move(leadership.election);
  daemon->leadership_loss_ = std::move(leadership.loss);
  daemon->decision_gate_ = std::move(leadership.gate);
  if (!options.state_dir.empty() || !options.store.empty()) {
    HVDD_RETURN_IF_ERROR(daemon->OpenJournal(options));
  }
  if (daemon->election_ != nullptr) {
    // From here on a write lands only while this daemon's lease holds the
    // leader key; one refused means another leads: step down.
    static_cast<EtcdJournal*>(daemon->journal_.get())
        ->SetFence(daemon->election_->Fence(),
                   [loss = daemon->leadership_loss_] { loss->Report(); });
  }
  HVDD_ASSIGN_OR_RETURN(auto access, AccessPolicy::Create(options.auth, options.state_dir));
  daemon->access_ = std::move(access);
  daemon->observers_.Add(&daemon->metrics_);
  daemon->heartbeats_ = std::make_unique<HeartbeatSchedule>();
  daemon->observers_.Add(daemon->heartbeats_.get());
  if (options.log_job_events) daemon->observers_.Add(&daemon->job_logger_);

  if (!options.state_dir.empty() && !options.shim_binary.empty()) {
    ShimLauncherOptions shims;
    shims.shim_binary = options.shim_binary;
    shims.socket_dir = (std::filesystem::path(options.state_dir) / "shims").string();
    // Exit statuses wait for a daemon at least as long as workers do.
    shims.shim_idle_timeout = std::max(options.worker_grace, absl::Minutes(10));
    if (daemon->etcd_ != nullptr) {
      HVDD_ASSIGN_OR_RETURN(shims.remote_namespace,
                            EtcdShimNamespace(*daemon->etcd_, options.etcd.prefix));
    }
    HVDD_ASSIGN_OR_RETURN(std::unique_ptr<ShimLauncher> shim_launcher,
                          ShimLauncher::Create(shims));
    ShimLauncher* shim = shim_launcher.get();
    daemon->shim_launcher_ = shim;
    HVDD_LOG(INFO) << "shims of remote hosts' workers live under ~/.horovodd/"
                   << shim->remote_namespace() << "/shims there";
    daemon->shim_closer_ = std::make_unique<ShimCloser>(shim);
    daemon->observers_.Add(daemon->shim_closer_.get());
    daemon->leave_jobs_running_ = options.leave_jobs_running;
    // srun runs under the job's shim too: the step outlives the daemon.
    std::unique_ptr<Launcher> slurm = SlurmLauncher::Create(shim);
    // Remote hosts get a shim each too (over SSH), so their workers outlive
    // the daemon as well.
    daemon->router_ = std::make_unique<HostRouter>(shim, shim, slurm.get());
    daemon->launchers_.push_back(std::move(slurm));
    daemon->launchers_.push_back(std::move(shim_launcher));
  } else {
    // This machine's workers and the srun processes of Slurm steps are the
    // daemon's children; other hosts' workers are reached over SSH.
    HVDD_ASSIGN_OR_RETURN(std::unique_ptr<Launcher> local, LocalLauncher::Create());
    HVDD_ASSIGN_OR_RETURN(std::unique_ptr<Launcher> ssh, SshLauncher::Create());
    std::unique_ptr<Launcher> slurm = SlurmLauncher::Create(local.get());
    daemon->router_ = std::make_unique<HostRouter>(local.get(), ssh.get(), slurm.get());
    daemon->launchers_.push_back(std::move(slurm));
    daemon->launchers_.push_back(std::move(local));
    daemon->launchers_.push_back(std::move(ssh));
  }
  daemon->jobs_ = std::make_unique<JobManager>(daemon->router_.get(), &daemon->observers_);
  daemon->jobs_->set_kv_limits(KvLimitsOf(options.limits));
  // Only a daemon whose workers outlive it takes jobs back.
  daemon->jobs_->set_checkpoints(daemon->shim_launcher_ != nullptr && daemon->journal_ != nullptr);
  daemon->jobs_->set_worker_environment(WorkerTlsEnvironment(options.tls));
  daemon->jobs_->set_store(daemon->journal_.get());
  daemon->jobs_->set_decision_gate(daemon->decision_gate_);
  daemon->access_->set_worker_token_check(
      [jobs = daemon->jobs_.get()](absl::string_view token) { return jobs->IsWorkerToken(token); });
  std::vector<ResumableJob> running;
  if (daemon->journal_) {
    HVDD_ASSIGN_OR_RETURN(auto recovered, daemon->journal_->Recover(
                                              daemon->shim_launcher_ ? &running : nullptr));
    for (const ArchivedJob& job : recovered) {
      daemon->metrics_.AddRecoveredJob(job.status.job_id(), job.status.state());
    }
    daemon->recovered_jobs_ = recovered.size() + running.size();
    daemon->jobs_->AddArchived(std::move(recovered));
  }
  if (!running.empty()) {
    // Taken back before serving, so a worker that reconnects at once finds
    // its job. They dial the address they were given: the same listen
    // address (a fixed port) brings them back.
    const std::string worker_address = FixedWorkerAddress(options.listen_address);
    if (!worker_address.empty()) daemon->jobs_->set_worker_address(worker_address);
    for (const ResumableJob& job : running) daemon->ResumeJob(job, options);
  }
  HVDD_RETURN_IF_ERROR(daemon->Serve(options));
  if (daemon->leadership_loss_ != nullptr) {
    daemon->leadership_loss_->Connect([d = daemon.get()] {
      d->RequestStop(
          {"no longer the leader (etcd says its lease is gone, or refused a write "
           "under it)",
           /*stop_jobs=*/false, /*deposed=*/true});
    });
  }
  return daemon;
}

void DaemonServer::ResumeJob(const ResumableJob& job, const DaemonOptions& options) {
  ShimContents contents;
  absl::StatusOr<ShimContents> reattached = shim_launcher_->Reattach(
      job.job_id, RemoteShimHostsOf(job), FixedWorkerAddress(options.listen_address));
  if (reattached.ok()) {
    contents = std::move(*reattached);
    for (const std::string& warning : contents.warnings) {
      HVDD_LOG(WARNING) << "job " << job.job_id << ": " << warning
                        << "; its workers there count as lost";
    }
  } else {
    HVDD_LOG(WARNING) << "job " << job.job_id << ": " << reattached.status().message()
                      << "; its workers count as lost";
  }
  std::string token = contents.worker_token;
  if (token.empty()) {
    // No worker of the old token is left to come back.
    absl::StatusOr<std::string> fresh = GenerateToken();
    token = fresh.ok() ? *fresh : std::string();
  }
  std::shared_ptr<JobDriver> driver =
      jobs_->Readmit(job.job_id, job.spec, token, job.client_request_id);
  // What a submission would have told them; the journal has the job already.
  metrics_.OnJobSubmitted(job.job_id, job.spec, job.created, job.client_request_id);
  heartbeats_->OnJobSubmitted(job.job_id, job.spec, job.created, job.client_request_id);
  absl::Duration grace = options.worker_grace;
  auto own = job.spec.env().find("HOROVODD_DAEMON_GRACE_S");
  double seconds = 0;
  if (own != job.spec.env().end() && absl::SimpleAtod(own->second, &seconds) && seconds > 0) {
    grace = absl::Seconds(seconds);
  }
  std::map<int64_t, ProcessCallbacks> callbacks =
      driver->Resume(job.checkpoint, contents.workers, contents.daemon_away, grace);
  if (reattached.ok()) {
    shim_launcher_->Adopt(job.job_id, [&callbacks](int64_t worker_id) {
      auto it = callbacks.find(worker_id);
      return it == callbacks.end() ? ProcessCallbacks{} : std::move(it->second);
    });
  }
  ++resumed_jobs_;
  HVDD_LOG(INFO) << "job " << job.job_id << " taken back: " << contents.workers.size()
                 << " worker(s) held by its shim (protocol " << contents.protocol_version
                 << "), away "
                 << absl::FormatDuration(
                        absl::Trunc(contents.daemon_away, absl::Milliseconds(100)));
}

absl::Status DaemonServer::OpenJournal(const DaemonOptions& options) {
  const std::string& state_dir = options.state_dir;
  if (!state_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(state_dir, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create state dir ", state_dir, ": ", error.message()));
    }
  }
  if (options.store.empty()) {
    HVDD_ASSIGN_OR_RETURN(journal_, Journal::Open(state_dir));
  } else {
    EtcdOptions etcd;
    HVDD_ASSIGN_OR_RETURN(etcd.endpoints, ParseEtcdUrl(options.store));
    etcd.ca_file = options.etcd.ca_file;
    etcd.cert_file = options.etcd.cert_file;
    etcd.key_file = options.etcd.key_file;
    if (etcd_ == nullptr) {
      HVDD_ASSIGN_OR_RETURN(etcd_, EtcdClient::Create(etcd));
    }
    HVDD_ASSIGN_OR_RETURN(journal_, EtcdJournal::Open(etcd_, options.etcd.prefix));
  }
  // Recorded before the others see an event, so the record is never behind
  // what an operator was shown.
  observers_.Add(journal_.get());
  return absl::OkStatus();
}

absl::Status DaemonServer::Serve(const DaemonOptions& options) {
  const std::string& listen = options.listen_address;
  absl::StatusOr<HostPort> address = ParseHostPort(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen address ", address.status().message()));
  }
  HVDD_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(options.tls, address->host));
  if (!options.tls.enabled() && !IsLoopbackHost(address->host)) {
    HVDD_LOG(WARNING) << "listening on " << listen
                      << " without TLS (tls.allow_insecure): tokens and job specs cross the "
                         "network in the clear";
  }
  JobServiceImpl::StopHandler stop;
  if (options.stoppable_over_rpc) {
    stop = [this](const v1::StopDaemonRequest& request, v1::StopDaemonResponse* response) {
      int running = 0;
      for (const v1::JobStatus& job : jobs_->Statuses()) {
        running += job.state() == v1::PENDING || job.state() == v1::RUNNING ||
                   job.state() == v1::RESETTING;
      }
      response->set_running_jobs(running);
      response->set_jobs_left_running(!request.stop_jobs() && leave_jobs_running_ &&
                                      shim_launcher_ != nullptr);
      RequestStop(
          {request.reason().empty() ? "horovodd stopped by horovodctl stop" : request.reason(),
           request.stop_jobs()});
      return absl::OkStatus();
    };
  }
  job_service_ = std::make_unique<JobServiceImpl>(jobs_.get(), std::move(stop));
  guarded_job_service_ = std::make_unique<GuardedJobService>(job_service_.get(), jobs_.get(),
                                                             access_.get(), options.limits);
  worker_service_ = std::make_unique<WorkerServiceImpl>(jobs_.get(), access_.get());
  worker_service_->set_limits(options.limits);
  worker_service_->set_heartbeat_schedule(heartbeats_.get());

  EnableHealthAndReflection();
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &port);
  builder.RegisterService(guarded_job_service_.get());
  builder.RegisterService(worker_service_.get());
  ConfigureWorkerServer(builder, options.limits);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counters;
  counters.push_back(MakeRpcCounter(&metrics_));
  builder.experimental().SetInterceptorCreators(std::move(counters));
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  // "" (the whole server) is SERVING by default; name the services too, so
  // a probe can ask for the one it cares about.
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  for (const char* service : {"horovodd.v1.JobService", "horovodd.v1.WorkerService"}) {
    if (health != nullptr) health->SetServingStatus(service, true);
  }
  std::string host = address->host;
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  address_ = absl::StrCat(host, ":", port);
  jobs_->set_worker_address(address_);

  if (!options.metrics_listen.empty()) {
    auto http = ServeMetrics(options.metrics_listen, [this] {
      std::vector<v1::JobStatus> live;
      for (const auto& driver : jobs_->List()) {
        live.push_back(driver->Status());
      }
      return metrics_.Render() + Metrics::RenderRanks(live) + Metrics::RenderGoodput(live) +
             Metrics::RenderSpares(live) + access_->RenderMetrics() +
             worker_service_->RenderMetrics();
    });
    if (!http.ok()) return http.status();
    metrics_http_ = std::move(*http);
    metrics_address_ = metrics_http_->address();
  }
  if (!options.status_page_listen.empty()) {
    StatusPageOptions page;
    page.listen = options.status_page_listen;
    page.tls = options.tls;
    HVDD_ASSIGN_OR_RETURN(status_page_,
                          StatusPageServer::Start(page, jobs_.get(), access_.get()));
  }
  return absl::OkStatus();
}

void DaemonServer::Shutdown(const std::string& reason) {
  ShutdownWith(reason, /*stop_jobs=*/!leave_jobs_running_);
}

void DaemonServer::ShutdownStoppingJobs(const std::string& reason) {
  ShutdownWith(reason, /*stop_jobs=*/true);
}

void DaemonServer::RequestStop(StopRequest request) {
  absl::MutexLock lock(&stop_mu_);
  if (!stop_) stop_ = std::move(request);
}

StopRequest DaemonServer::AwaitStop() {
  absl::MutexLock lock(&stop_mu_);
  stop_mu_.Await(absl::Condition(
      +[](std::optional<StopRequest>* stop) { return stop->has_value(); }, &stop_));
  return *stop_;
}

void DaemonServer::StepDown(const std::string& reason) {
  ShutdownWith(reason, /*stop_jobs=*/false, /*deposed=*/true);
}

void DaemonServer::ShutdownWith(const std::string& reason, bool stop_jobs, bool deposed) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ && server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
  }
  // A deposed leader's jobs are the new leader's: it ends none of them.
  const bool leave_jobs = (deposed || !stop_jobs) && shim_launcher_ != nullptr;
  if (leave_jobs) {
    // The drivers stop deciding first, then the shims are let go: from here
    // on nothing is recorded, and the next daemon takes the jobs back.
    jobs_->Abandon();
  } else {
    jobs_->Shutdown(reason, absl::Seconds(5));
  }
  // Nothing new can be launched now: the workers are left to the next daemon
  // under their shims, or none may be left running.
  if (!leave_jobs || !router_->DetachAll()) router_->TerminateAll(absl::Seconds(2));
  if (leave_jobs) {
    HVDD_LOG(INFO) << reason << ": running jobs left to the next horovodd ("
                   << shim_launcher_->running() << " worker(s))";
  }
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

DaemonServer::~DaemonServer() {
  if (jobs_) Shutdown("daemon stopped");
  if (leadership_loss_) leadership_loss_->Connect(nullptr);
  metrics_http_.reset();
  status_page_.reset();  // its streams read the jobs
  // Drivers (inside jobs_) go before the launchers whose callbacks they own.
  jobs_.reset();
  router_.reset();
  for (std::unique_ptr<Launcher>& launcher : launchers_) launcher.reset();
  // Nothing writes any more: a standby need not wait out the lease (unless
  // this one was deposed, and the lease is gone anyway).
  if (election_) {
    if (election_->is_leader()) election_->Resign();
    election_.reset();
  }
}

namespace {
// Beyond the workers': clients, the journal, the listening sockets.
constexpr uint64_t kFilesHeadroom = 256;
}  // namespace

void RaiseOpenFileLimit(int max_workers_per_job, int files_per_worker) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      limit = raised;
    } else if (limit.rlim_max == RLIM_INFINITY) {
      // Linux refuses an unlimited count; its own ceiling (fs.nr_open) is often 2^20.
      raised.rlim_cur = 1 << 20;
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
  }
  const uint64_t needed = static_cast<uint64_t>(std::max(max_workers_per_job, 0)) *
                              static_cast<uint64_t>(std::max(files_per_worker, 1)) +
                          kFilesHeadroom;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    HVDD_LOG(WARNING) << "open file limit is " << static_cast<uint64_t>(limit.rlim_cur) << " (hard "
                      << static_cast<uint64_t>(limit.rlim_max)
                      << "): a job of limits.max_workers_per_job = " << max_workers_per_job
                      << " workers needs about " << needed
                      << "; raise it (systemd LimitNOFILE=, ulimit -Hn)";
  }
}

}  // namespace horovodd::daemon
