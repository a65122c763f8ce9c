#include "daemon/daemon_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "daemon/job_service.h"
#include "daemon/worker_service.h"

namespace horovodd::daemon {

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(const DaemonOptions& options) {
  std::unique_ptr<DaemonServer> daemon(new DaemonServer());
  auto launcher = LocalLauncher::Create();
  if (!launcher.ok()) return launcher.status();
  daemon->launcher_ = std::move(*launcher);
  daemon->router_ = std::make_unique<HostRouter>(daemon->launcher_.get(), nullptr);
  daemon->jobs_ = std::make_unique<JobManager>(daemon->router_.get());
  daemon->job_service_ = std::make_unique<JobServiceImpl>(daemon->jobs_.get());
  daemon->worker_service_ = std::make_unique<WorkerServiceImpl>(daemon->jobs_.get());

  const std::string& listen = options.listen_address;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", listen, "' is not host:port"));
  }
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(daemon->job_service_.get());
  builder.RegisterService(daemon->worker_service_.get());
  builder.SetMaxReceiveMessageSize(16 << 20);
  daemon->server_ = builder.BuildAndStart();
  if (!daemon->server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  std::string host = listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  daemon->address_ = absl::StrCat(host, ":", port);
  daemon->jobs_->set_worker_address(daemon->address_);
  return daemon;
}

void DaemonServer::Shutdown(const std::string& reason) {
  if (shut_down_) return;
  shut_down_ = true;
  jobs_->Shutdown(reason, absl::Seconds(5));
  // Nothing new can be launched now; make sure nothing is left running.
  launcher_->TerminateAll(absl::Seconds(2));
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

DaemonServer::~DaemonServer() {
  if (server_) Shutdown("daemon stopped");
  // Drivers (inside jobs_) go before the launcher whose callbacks they own.
  jobs_.reset();
}

}  // namespace horovodd::daemon
