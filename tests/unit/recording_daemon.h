// RecordingDaemon: horovodd's own JobManager and WorkerService on a loopback
// port (real gRPC), running one job of one worker, with a launcher that
// records each launch (and the worker's environment) instead of starting a
// process. Tests then play that worker with the runtime's DaemonClient.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/auth_settings.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/launch/launcher.h"
#include "daemon/rpc/worker_service.h"
#include "fake_launcher.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"
#include "wait_until.h"
#include "worker_runtime/daemon_client/daemon_client.h"

namespace horovodd::testing {

// Records launches (and each worker's environment) instead of starting
// processes; a signal "ends" the recorded worker.
class RecordingLauncher final : public FakeLauncherBase {
 public:
  absl::StatusOr<daemon::LaunchedProcess> Launch(const daemon::WorkerLaunch& launch,
                                                 daemon::ProcessCallbacks callbacks) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t handle = next_handle_++;
    env_[handle] = launch.spec.env;
    callbacks_[handle] = std::move(callbacks);
    return daemon::LaunchedProcess{handle, static_cast<int>(handle)};
  }
  absl::Status Signal(int64_t handle, int sig) override {
    daemon::ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(handle);
      if (it == callbacks_.end()) return absl::NotFoundError("already ended");
      callbacks = std::move(it->second);
      callbacks_.erase(it);
    }
    daemon::ExitInfo exit;
    exit.signal = sig;
    if (callbacks.on_exit) callbacks.on_exit(exit);
    return absl::OkStatus();
  }
  // The first launched worker's environment (empty before any launch).
  std::map<std::string, std::string> FirstEnv() {
    std::lock_guard<std::mutex> lock(mu_);
    return env_.empty() ? std::map<std::string, std::string>{} : env_.begin()->second;
  }
  // Every launched worker's environment, by launch handle (from 1).
  std::map<int64_t, std::map<std::string, std::string>> Envs() {
    std::lock_guard<std::mutex> lock(mu_);
    return env_;
  }

 private:
  std::mutex mu_;
  int64_t next_handle_ = 1;
  std::map<int64_t, std::map<std::string, std::string>> env_;
  std::map<int64_t, daemon::ProcessCallbacks> callbacks_;
};

// horovodd's job manager and WorkerService on a loopback port, with or
// without a heartbeat schedule, running one job of `num_proc` workers (one
// host) that may grow to `max_np`.
class RecordingDaemon {
 public:
  RecordingDaemon(bool announce, int max_np, double liveness_timeout_s, int num_proc = 1)
      : jobs_(&launcher_, &observers_),
        access_(MakeAccess()),
        worker_service_(&jobs_, access_.get()) {
    observers_.Add(&heartbeats_);
    access_->set_worker_token_check(
        [this](absl::string_view token) { return jobs_.IsWorkerToken(token); });
    if (announce) worker_service_.set_heartbeat_schedule(&heartbeats_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&worker_service_);
    daemon::ConfigureWorkerServer(builder, daemon::DaemonLimits{});
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    jobs_.set_worker_address(address());

    v1::JobSpec spec = num_proc == 1 ? testing::OneLocalWorkerSpec({"stand-in"})
                                     : testing::LocalJobSpec({"stand-in"}, num_proc, 1, num_proc);
    spec.set_max_np(max_np);
    spec.set_elastic(true);
    spec.set_liveness_timeout_seconds(liveness_timeout_s);
    auto id = jobs_.Submit(spec);
    REQUIRE(id.ok());
    job_id_ = *id;
    REQUIRE(WaitUntil(
        [this, num_proc] { return launcher_.Envs().size() >= static_cast<size_t>(num_proc); }));
  }
  ~RecordingDaemon() {
    jobs_.Shutdown("test over", absl::Seconds(5));
    server_->Shutdown(std::chrono::system_clock::now());
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  static std::unique_ptr<daemon::AccessPolicy> MakeAccess() {
    auto access = daemon::AccessPolicy::Create(daemon::AuthSettings{}, "");
    REQUIRE(access.ok());
    return std::move(*access);
  }

  // Worker identities (job, worker id, token) by launch handle (from 1).
  std::map<int64_t, v1::WorkerIdentity> Identities() {
    std::map<int64_t, v1::WorkerIdentity> out;
    for (auto& [handle, env] : launcher_.Envs()) {
      v1::WorkerIdentity& who = out[handle];
      who.set_job_id(env["HOROVODD_JOB_ID"]);
      who.set_worker_id(std::stoll(env["HOROVODD_WORKER_ID"]));
      who.set_token(env["HOROVODD_WORKER_TOKEN"]);
    }
    return out;
  }
  // The worker of launch `handle` dies of SIGKILL.
  void Kill(int64_t handle) { REQUIRE(launcher_.Signal(handle, 9).ok()); }
  v1::JobStatus Status() { return jobs_.Find(job_id_)->Status(); }

  // The launched worker's client, as the runtime makes it from its environment.
  internal::DaemonClientOptions ClientOptions() {
    auto env = launcher_.FirstEnv();
    internal::DaemonClientOptions options;
    options.address = address();
    options.job_id = env["HOROVODD_JOB_ID"];
    options.worker_id = std::stoll(env["HOROVODD_WORKER_ID"]);
    options.token = env["HOROVODD_WORKER_TOKEN"];
    options.on_daemon_lost = [] {};  // never exit the test process
    return options;
  }

 private:
  RecordingLauncher launcher_;
  daemon::ObserverList observers_;
  daemon::HeartbeatSchedule heartbeats_;
  daemon::JobManager jobs_;
  std::unique_ptr<daemon::AccessPolicy> access_;
  daemon::WorkerServiceImpl worker_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string job_id_;
};

}  // namespace horovodd::testing
