// A running horovodd: the gRPC server, the job manager and the local
// launcher, wired together. Used by the horovodd binary and embedded by
// horovodrun when no daemon is named.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/job_manager.h"
#include "daemon/launcher.h"
#include "daemon/local_launcher.h"

namespace grpc {
class Server;
}

namespace horovodd::daemon {

class JobServiceImpl;
class WorkerServiceImpl;

struct DaemonOptions {
  // host:port; port 0 picks a free one.
  std::string listen_address = "127.0.0.1:0";
};

class DaemonServer {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const DaemonOptions& options);
  ~DaemonServer();  // Shutdown("daemon stopped") if not done yet

  // host:port clients and workers dial.
  const std::string& address() const { return address_; }
  JobManager& jobs() { return *jobs_; }
  // Cancels every job with `reason`, waits for their workers, stops serving.
  void Shutdown(const std::string& reason);

 private:
  DaemonServer() = default;

  std::string address_;
  std::unique_ptr<LocalLauncher> launcher_;
  std::unique_ptr<HostRouter> router_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace horovodd::daemon
