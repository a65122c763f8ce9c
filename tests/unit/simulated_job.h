// A JobDriver on a SimulatedClock for the driver's tests: a launcher that
// records launches and "ends" workers on a signal, a job built on them, a
// worker's rendezvous call answered later, and a formed two-host job.
#pragma once

#include <csignal>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "daemon/job/job_driver.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"
#include "fake_launcher.h"
#include "job_spec_support.h"
#include "wait_until.h"

namespace horovodd::daemon::simulated {

using testing::WaitUntil;

// Records each launch instead of starting a process; a signal "ends" the
// worker as that signal would (its exit callback runs on the signalling thread).
class FakeLauncher final : public testing::FakeLauncherBase {
 public:
  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t handle = next_handle_++;
    worker_ids_.push_back(std::stoll(launch.spec.env.at("HOROVODD_WORKER_ID")));
    hosts_.push_back(launch.host);
    callbacks_[handle] = std::move(callbacks);
    return LaunchedProcess{handle, static_cast<int>(1000 + handle)};
  }
  absl::Status Signal(int64_t handle, int sig) override {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(handle);
      if (it == callbacks_.end()) return absl::NotFoundError("already ended");
      callbacks = std::move(it->second);
      callbacks_.erase(it);
      signals_.push_back(sig);
    }
    ExitInfo exit;
    exit.signal = sig;
    if (callbacks.on_exit) callbacks.on_exit(exit);
    return absl::OkStatus();
  }

  // The process of the `n`-th launch (from 0) exits with `code`.
  void Exit(size_t n, int code) {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(static_cast<int64_t>(n) + 1);
      REQUIRE(it != callbacks_.end());
      callbacks = std::move(it->second);
      callbacks_.erase(it);
    }
    ExitInfo exit;
    exit.exit_code = code;
    callbacks.on_exit(exit);
  }
  std::vector<std::string> hosts() {
    std::lock_guard<std::mutex> lock(mu_);
    return hosts_;
  }

  std::vector<int64_t> worker_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_ids_;
  }
  std::vector<int> signals() {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_;
  }

 private:
  std::mutex mu_;
  int64_t next_handle_ = 1;
  std::vector<int64_t> worker_ids_;
  std::vector<std::string> hosts_;
  std::vector<int> signals_;
  std::map<int64_t, ProcessCallbacks> callbacks_;
};

class NullChannel final : public WorkerChannel {
 public:
  void Send(const v1::DaemonMessage&) override {}
};

// One job on simulated time. Status() doubles as a barrier: it runs on the
// job's loop after everything posted before it.
struct SimulatedJob {
  // `gate`: the daemon's decision gate the job asks (null: always open).
  explicit SimulatedJob(v1::JobSpec spec, std::shared_ptr<DecisionGate> gate = nullptr) {
    JobContext context;
    context.job_id = "job-sim";
    context.daemon_address = "127.0.0.1:1";
    context.launcher = &launcher;
    context.worker_token = "token";
    context.clock = &clock;
    context.gate = std::move(gate);
    driver = std::make_unique<JobDriver>(std::move(context), std::move(spec));
    driver->Start();
  }

  SimulatedClock clock;
  FakeLauncher launcher;
  std::unique_ptr<JobDriver> driver;  // last: goes before the clock and launcher
};

inline v1::JobStatus EndedStatus(JobDriver& driver) {
  REQUIRE(WaitUntil([&] { return driver.Ended(); }));
  return driver.Status();
}

// A worker's pending rendezvous call: its answer once the driver gives one.
struct PendingAnswer {
  std::mutex mu;
  std::optional<absl::StatusOr<v1::RendezvousResponse>> answer;

  bool answered() {
    std::lock_guard<std::mutex> lock(mu);
    return answer.has_value();
  }
  absl::StatusOr<v1::RendezvousResponse> Get() {
    REQUIRE(WaitUntil([&] { return answered(); }));
    std::lock_guard<std::mutex> lock(mu);
    return *answer;
  }
};

// Worker `id` asks for the first generation after `after`.
inline std::shared_ptr<PendingAnswer> Ask(JobDriver& driver, int64_t id, int64_t after) {
  auto pending = std::make_shared<PendingAnswer>();
  v1::RendezvousRequest request;
  request.mutable_who()->set_job_id("job-sim");
  request.mutable_who()->set_worker_id(id);
  request.set_after_generation(after);
  driver.Rendezvous(request, [pending](absl::StatusOr<v1::RendezvousResponse> r) {
    std::lock_guard<std::mutex> lock(pending->mu);
    pending->answer = std::move(r);
  });
  return pending;
}

// Four workers, two on localhost and two on 127.0.0.1, blacklisted for good
// on a failure, in a formed generation 1; launch n (from 0) is worker n + 1.
struct TwoHostJob {
  static v1::JobSpec Spec() {
    v1::JobSpec spec = testing::LocalJobSpec({"train"}, 4, 2, 4);
    spec.set_elastic(true);
    spec.set_elastic_timeout_seconds(600);
    spec.set_blacklist_cooldown_min_seconds(0);
    spec.set_blacklist_cooldown_max_seconds(0);
    spec.mutable_discovery()->clear_hosts();
    for (const char* host : {"localhost", "127.0.0.1"}) {
      auto* h = spec.mutable_discovery()->add_hosts();
      h->set_host(host);
      h->set_slots(2);
    }
    return spec;
  }
  explicit TwoHostJob(v1::JobSpec spec = Spec(), std::shared_ptr<DecisionGate> gate = nullptr)
      : job(std::move(spec), std::move(gate)) {
    REQUIRE(WaitUntil([&] { return job.launcher.worker_ids().size() == 4; }));
    REQUIRE(job.launcher.hosts() ==
            std::vector<std::string>{"localhost", "localhost", "127.0.0.1", "127.0.0.1"});
    std::vector<std::shared_ptr<PendingAnswer>> first;
    for (int64_t id = 1; id <= 4; ++id) first.push_back(Ask(*job.driver, id, 0));
    for (auto& answer : first) REQUIRE(answer->Get().ok());
  }
  SimulatedJob job;
};

}  // namespace horovodd::daemon::simulated
