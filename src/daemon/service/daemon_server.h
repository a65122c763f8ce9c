// A running horovodd: the gRPC server (job and worker services, health
// checking, reflection), the job manager, the local launcher, the journal
// (when there is a state dir) and the metrics, wired together. Used by the
// horovodd binary and embedded by horovodrun when no daemon is named.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/auth_settings.h"
#include "daemon/config/daemon_config.h"
#include "daemon/decision_gate/decision_gate.h"
#include "daemon/etcd_client/etcd_client.h"
#include "daemon/job/job_manager.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/journal/journal.h"
#include "daemon/launch/launcher.h"
#include "daemon/leadership/leader_election.h"
#include "daemon/leadership/leadership_loss.h"
#include "daemon/metrics/metrics.h"
#include "daemon/metrics/metrics_http.h"
#include "daemon/service/job_event_logger.h"
#include "daemon/status_page/status_page.h"

namespace grpc {
class Server;
}

namespace horovodd::daemon {

class GuardedJobService;
class HeartbeatSchedule;
class JobServiceImpl;
class ShimLauncher;
class WorkerServiceImpl;

// The usual soft limit on open files (1,024) stops a daemon at a few hundred
// workers with "too many open files" (gRPC then resets connections). The hard
// limit is the operator's (systemd's LimitNOFILE, ulimit -Hn): this raises the
// soft limit to it, and warns when even that is short of a job of
// `max_workers_per_job` workers holding `files_per_worker` descriptors each
// (a local worker: its connection, two output pipes and a pidfd). Process-wide
// (workers inherit it), so horovodd's main calls it, not DaemonServer.
void RaiseOpenFileLimit(int max_workers_per_job, int files_per_worker = 4);

struct DaemonOptions {
  // host:port; port 0 picks a free one.
  std::string listen_address = "127.0.0.1:0";
  // Job records (the journal, horovodd.db) are kept here, and jobs an earlier
  // run recorded are listed again; created if missing. Empty: nothing is kept
  // (the daemon embedded in horovodrun).
  std::string state_dir;
  // Where the job records are: "" = <state_dir>/horovodd.db (SQLite);
  // "etcd://h1:2379,..." = that etcd cluster, under etcd.prefix (then kept
  // even without a state dir).
  std::string store;
  EtcdSettings etcd;
  // host:port for GET /metrics (port 0 picks a free one); empty: not served.
  std::string metrics_listen;
  // host:port of the status page (port 0 picks a free one), under the same
  // tokens and TLS as the gRPC API; empty: not served.
  std::string status_page_listen;
  DaemonLimits limits;
  // Who may call (tokens) and how the listener is secured (TLS).
  AuthSettings auth;
  TlsSettings tls;
  // Write job events (not worker output) to the log: horovodd does;
  // horovodrun prints them itself.
  bool log_job_events = false;
  // With a state dir: this machine's workers run under this horovodd-shim
  // (launch/shim_client/shim_launcher.h) instead of as the daemon's children, so
  // they outlive it, and Start takes back the jobs an earlier run left
  // running. Empty: the daemon's children, which die with it (the daemon
  // embedded in horovodrun).
  std::string shim_binary;
  // With shims: Shutdown leaves the running jobs to the next daemon (false:
  // it cancels them, shutdown.stop_jobs).
  bool leave_jobs_running = false;
  // The workers' grace period without a daemon (worker.daemon_grace): a job
  // whose workers all ended while the daemon was away longer is FAILED.
  absl::Duration worker_grace = absl::Minutes(10);
  // JobService.StopDaemon (horovodctl stop) asks this daemon to stop
  // (AwaitStop returns it): the standalone horovodd, whose main waits for it.
  // False: the RPC is refused (the daemon embedded in horovodrun).
  bool stoppable_over_rpc = false;
};

// A stop asked for, by a signal or by JobService.StopDaemon.
struct StopRequest {
  std::string reason;      // the ended jobs' reason, and the log's
  bool stop_jobs = false;  // end the running jobs even if they would be left running
  // This daemon no longer leads (etcd says its lease is gone, or refused a
  // write under it): every job is left to the new leader, whatever stop_jobs
  // and leave_jobs_running say (StepDown).
  bool deposed = false;
};

// With an etcd store (issue 36): the leadership a standby won, handed to
// DaemonServer::Start. Its lease is kept alive from the moment it is won.
struct Leadership {
  std::shared_ptr<EtcdClient> etcd;
  std::unique_ptr<LeaderElection> election;  // elected; its thread renews the lease
  std::shared_ptr<LeadershipLoss> loss;      // told when the lease is gone
  // Held by the election while the lease goes unrenewed: the jobs' drivers
  // act on no process meanwhile (decision_gate.h).
  std::shared_ptr<DecisionGate> gate;
  // The listen address with the port the standby listened on (fixed from
  // then on: the leader serves where it was advertised).
  std::string listen_address;
  // Whether a standby served (and "listening on" was said) before it led.
  bool stood_by = false;
};

class DaemonServer {
 public:
  // Opens the journal and recovers its jobs, loads (or makes) the tokens,
  // then serves. INVALID_ARGUMENT for a bad address or TLS settings (and for
  // plaintext beyond loopback without tls.allow_insecure), UNAVAILABLE when
  // it cannot listen, FAILED_PRECONDITION for a token file others may read,
  // and the journal's error (naming the path) for a state dir it cannot use.
  // With an etcd store, `leadership` is what StandBy returned.
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const DaemonOptions& options,
                                                             Leadership leadership = {});
  // With an etcd store: campaigns for the leadership, serving JobService as
  // a standby (daemon/standby: reads forwarded to the leader, writes refused
  // naming it) on options.listen_address until this daemon is elected;
  // `on_listening(address)` once it serves as a standby. CANCELLED when
  // SIGTERM or SIGINT (blocked, and so pending) or StopDaemon comes first;
  // UNAVAILABLE / INVALID_ARGUMENT as Start for the listener and etcd.
  static absl::StatusOr<Leadership> StandBy(
      const DaemonOptions& options, const std::function<void(const std::string&)>& on_listening);
  ~DaemonServer();  // Shutdown("daemon stopped") if not done yet

  // host:port clients and workers dial.
  const std::string& address() const { return address_; }
  // host:port of GET /metrics; empty when not served.
  const std::string& metrics_address() const { return metrics_address_; }
  // The status page's URL ("http://127.0.0.1:PORT/"); empty when not served.
  std::string status_page_url() const { return status_page_ ? status_page_->url() : ""; }
  // The same with a login for the viewer token (horovodrun prints it for its
  // embedded daemon); empty without the page or a viewer token.
  std::string status_page_viewer_link() const {
    return status_page_ && !viewer_token().empty() ? status_page_->LoginUrl(viewer_token()) : "";
  }
  // Jobs an earlier run recorded, recovered from the journal at start.
  size_t recovered_jobs() const { return recovered_jobs_; }
  // Of those, the running ones taken back.
  size_t resumed_jobs() const { return resumed_jobs_; }
  // The admin token (the embedded daemon's horovodrun uses it), and the file
  // it is kept in (empty when it is only in memory).
  const std::string& admin_token() const { return access_->admin_token(); }
  const std::string& admin_token_path() const { return access_->admin_token_path(); }
  // The viewer token (the embedded daemon's is in memory, for horovodrun's
  // link to the status page); empty when there is none.
  const std::string& viewer_token() const { return access_->viewer_token(); }
  JobManager& jobs() { return *jobs_; }
  Metrics& metrics() { return metrics_; }
  // Marks the server NOT_SERVING for health checks, refuses new jobs, cancels
  // every job with `reason` (recorded in the journal), waits for their
  // workers, stops serving. With leave_jobs_running (and shims) it leaves
  // the jobs and their local workers running instead, recording nothing, so
  // that the next daemon takes them back; remote workers still end.
  void Shutdown(const std::string& reason);
  // Shutdown(reason) ending the jobs whatever leave_jobs_running says.
  void ShutdownStoppingJobs(const std::string& reason);
  // Shutdown of a deposed leader: the drivers stop deciding and every worker
  // is left to the new leader, nothing recorded, whatever leave_jobs_running says.
  void StepDown(const std::string& reason);
  // Records a stop; the first one asked for wins. Any thread.
  void RequestStop(StopRequest request);
  // Blocks until a stop is requested (horovodd's main), then returns it.
  StopRequest AwaitStop();

 private:
  DaemonServer() = default;
  absl::Status OpenJournal(const DaemonOptions& options);
  absl::Status Serve(const DaemonOptions& options);
  // A job an earlier run left running: its shim reattached, its driver
  // resumed (never fails: workers not found count as lost).
  void ResumeJob(const ResumableJob& job, const DaemonOptions& options);
  void ShutdownWith(const std::string& reason, bool stop_jobs, bool deposed = false);

  std::string address_;
  std::string metrics_address_;
  size_t recovered_jobs_ = 0;
  size_t resumed_jobs_ = 0;
  bool leave_jobs_running_ = false;
  // Observers outlive the job manager, which calls them from its drivers.
  Metrics metrics_;
  std::unique_ptr<Journal> journal_;  // null without a state dir or store
  std::shared_ptr<EtcdClient> etcd_;  // with an etcd store: the journal's and the election's
  std::unique_ptr<LeaderElection> election_;         // leading with an etcd store; else null
  std::shared_ptr<LeadershipLoss> leadership_loss_;  // with election_
  std::shared_ptr<DecisionGate> decision_gate_;      // with election_; the jobs ask it
  JobEventLogger job_logger_;
  std::unique_ptr<HeartbeatSchedule> heartbeats_;  // each job's, for its Attach streams
  ObserverList observers_;
  // The launchers router_ routes to, owned here: without shims the local,
  // SSH and Slurm launchers, with shims the shim and Slurm launchers. They
  // go in the order listed (the Slurm launcher first) after the router.
  std::vector<std::unique_ptr<Launcher>> launchers_;
  ShimLauncher* shim_launcher_ = nullptr;     // with shims: one of launchers_
  std::unique_ptr<JobObserver> shim_closer_;  // lets an ended job's shim go
  // Every launch, and stopping (or with shims leaving) every worker.
  std::unique_ptr<HostRouter> router_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<AccessPolicy> access_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<GuardedJobService> guarded_job_service_;  // the one registered, over job_service_
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> metrics_http_;       // null when not served
  std::unique_ptr<StatusPageServer> status_page_;  // null when not served
  bool shut_down_ = false;
  absl::Mutex stop_mu_;
  std::optional<StopRequest> stop_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace horovodd::daemon
