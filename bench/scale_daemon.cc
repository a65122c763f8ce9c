// The daemon side of the scale benchmark (bench/scale_load.cc drives it).
//
// This is horovodd's own job manager, job drivers and WorkerService (the code
// that handles rendezvous, key-value traffic and notification streams), served
// over gRPC exactly as horovodd serves them. Only the launcher differs: instead
// of fork/exec'ing N worker processes (10,000 real processes do not fit on a
// small machine, and process start-up is not what this measures) it records
// each launch and prints the worker's identity on stdout, so the load
// generator can play that worker over gRPC. The job service, journal and
// metrics endpoint are not served: no client calls them during the benchmark.
//
// Protocol on stdin/stdout (one line each):
//   out: ADDR <host:port>                      once serving
//   in:  GO                                    submit the job now
//   out: LAUNCH <job_id> <worker_id> <token>   one per worker ("-" = no token)
//   in:  KILL <n>                              the n-th launched worker (from 1)
//                                              dies of SIGKILL
//   in:  QUIT                                  report and exit
//   out: STATS rss_hwm_kb=<VmHWM> rss_kb=<VmRSS> rss_at_go_kb=<VmRSS at GO>
//        threads=<Threads> sockets=<open sockets> cpu_s=<user+sys since GO>
//        launch_span_s=<first to last launch> ready_s=<submit to generation ready>
//
// Arguments: WORKERS SLOTS_PER_HOST [ADDRESSES [CONNECTIONS]]; CONNECTIONS (the
// load generator's; default WORKERS) sizes the open file limit.
// It listens on one port of ADDRESSES loopback addresses (127.0.0.1, .2, ...):
// a client address can open only about 28,000 connections to one server
// address (the ephemeral port range), so 100,000 workers need several.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/launch/launcher.h"
#include "daemon/rpc/worker_service.h"
#include "daemon/service/daemon_server.h"

namespace horovodd::bench {
namespace {

using daemon::ExitInfo;
using daemon::LaunchedProcess;
using daemon::ProcessCallbacks;
using daemon::WorkerLaunch;

// Records launches instead of starting processes. A signal "kills" the
// recorded worker: its exit is reported as the real launcher would.
//
// The LAUNCH lines go out from a thread of their own: a real launcher never
// waits for its worker to start reading, and the driver's loop, which runs
// Launch, would otherwise stall whenever the pipe to the load generator is
// full (it answers no Attach or Rendezvous meanwhile).
class RecordingLauncher final : public daemon::Launcher {
 public:
  RecordingLauncher() : writer_([this] { WriteLines(); }) {}
  ~RecordingLauncher() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    writer_.join();
  }

  // Returns once every LAUNCH line so far is written.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    drained_cv_.wait(lock, [this] { return pending_.empty() && !writing_; });
  }

  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override {
    auto env_or = [&](const char* name, const char* fallback) {
      auto it = launch.spec.env.find(name);
      return it == launch.spec.env.end() || it->second.empty() ? std::string(fallback) : it->second;
    };
    const std::string line = absl::StrCat("LAUNCH ", env_or("HOROVODD_JOB_ID", "?"), " ",
                                          env_or("HOROVODD_WORKER_ID", "?"), " ",
                                          env_or("HOROVODD_WORKER_TOKEN", "-"), "\n");
    std::lock_guard<std::mutex> lock(mu_);
    pending_ += line;
    cv_.notify_one();
    const auto now = std::chrono::steady_clock::now();
    if (next_handle_ == 1) first_launch_ = now;
    last_launch_ = now;
    const int64_t handle = next_handle_++;
    callbacks_[handle] = std::move(callbacks);
    return LaunchedProcess{handle, static_cast<int>(handle)};
  }

  // Seconds from the first launch to the last: the driver's launch loop.
  double launch_span_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::chrono::duration<double>(last_launch_ - first_launch_).count();
  }

  absl::Status Signal(int64_t handle, int sig) override {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(handle);
      if (it == callbacks_.end()) return absl::NotFoundError("worker already ended");
      callbacks = std::move(it->second);
      callbacks_.erase(it);
    }
    ExitInfo exit;
    exit.signal = sig;
    if (callbacks.on_exit) callbacks.on_exit(exit);
    return absl::OkStatus();
  }

  // Its workers are the load generator's: nothing runs here to stop.
  void TerminateAll(absl::Duration) override {}
  bool DetachAll() override { return false; }
  size_t running() const override { return 0; }

 private:
  void WriteLines() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping
      std::string lines;
      lines.swap(pending_);
      writing_ = true;
      lock.unlock();
      std::fwrite(lines.data(), 1, lines.size(), stdout);
      std::fflush(stdout);
      lock.lock();
      writing_ = false;
      drained_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, drained_cv_;
  std::string pending_;    // LAUNCH lines not written yet; guarded by mu_
  bool writing_ = false;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  int64_t next_handle_ = 1;
  std::map<int64_t, ProcessCallbacks> callbacks_;
  std::chrono::steady_clock::time_point first_launch_, last_launch_;
  std::thread writer_;  // last: starts once the rest is constructed
};

// When the daemon itself saw the job submitted and its first generation
// ready (all rendezvous answered), to tell the daemon's time from the load
// generator's.
class ReadyObserver final : public daemon::JobObserver {
 public:
  void OnJobSubmitted(const std::string&, const v1::JobSpec&, absl::Time created,
                      const std::string&) override {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_ = created;
  }
  void OnJobEvent(const std::string&, const v1::JobEvent& event) override {
    if (event.kind() != v1::JobEvent::MEMBERSHIP) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_ == absl::InfinitePast()) ready_ = absl::Now();
  }
  double ready_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_ == absl::InfinitePast() ? -1 : absl::ToDoubleSeconds(ready_ - submitted_);
  }

 private:
  std::mutex mu_;
  absl::Time submitted_ = absl::InfinitePast();
  absl::Time ready_ = absl::InfinitePast();
};

// "Name:   1234 kB" lines of /proc/self/status, as a number.
std::string ProcStatus(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::string value = line.substr(field.size() + 1);
      const auto first = value.find_first_not_of(" \t");
      const auto last = value.find_first_of(" \t", first);
      return value.substr(first, last == std::string::npos ? last : last - first);
    }
  }
  return "0";
}

// Open sockets of this process: its connections and listeners.
int OpenSockets() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int sockets = 0;
  char target[64];
  while (dirent* entry = readdir(dir)) {
    const std::string path = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n > 0 && std::string(target, n).rfind("socket:", 0) == 0) ++sockets;
  }
  closedir(dir);
  return sockets;
}

// A port free on 127.0.0.1 now, to listen on at every loopback address (0: none).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// User + system CPU of this process so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec * 1e-6;
}

int Main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s WORKERS SLOTS_PER_HOST [ADDRESSES [CONNECTIONS]]\n", argv[0]);
    return 2;
  }
  const int workers = std::atoi(argv[1]);
  const int slots = std::atoi(argv[2]);
  const int addresses = argc >= 4 ? std::atoi(argv[3]) : 1;
  // The load generator's connections (one per worker, or per host when a
  // host's workers share an AttachHost stream): what the open files go to.
  const int connections = argc >= 5 ? std::atoi(argv[4]) : workers;
  if (workers < 1 || slots < 1 || addresses < 1 || addresses > 254 || connections < 1) {
    std::fprintf(stderr, "WORKERS, SLOTS_PER_HOST and ADDRESSES must be positive integers\n");
    return 2;
  }

  // The limits an operator raises for jobs this big (config `limits`); the
  // rest are horovodd's defaults. All simulated workers connect from
  // 127.0.0.1, so the per-client stream cap must hold all of them.
  // As horovodd's main does; a recorded worker holds only its connection.
  daemon::RaiseOpenFileLimit(connections, /*files_per_worker=*/1);
  daemon::DaemonLimits limits;
  limits.max_workers_per_job = std::max(limits.max_workers_per_job, workers);
  limits.max_attach_streams_per_client = std::max(limits.max_attach_streams_per_client, workers);
  limits.max_kv_waiters_per_job = std::max(limits.max_kv_waiters_per_job, 2 * workers);
  daemon::KvLimits kv_limits;
  kv_limits.max_waiters = limits.max_kv_waiters_per_job;

  RecordingLauncher launcher;
  ReadyObserver ready;
  // As horovodd: Attach streams tell workers the job's heartbeat interval.
  daemon::HeartbeatSchedule heartbeats;
  daemon::ObserverList observers;
  observers.Add(&ready);
  observers.Add(&heartbeats);
  daemon::JobManager jobs(&launcher, &observers);
  jobs.set_kv_limits(kv_limits);
  auto access = daemon::AccessPolicy::Create(daemon::AuthSettings{}, "");
  if (!access.ok()) {
    std::fprintf(stderr, "auth: %s\n", access.status().ToString().c_str());
    return 1;
  }
  (*access)->set_worker_token_check(
      [&jobs](absl::string_view token) { return jobs.IsWorkerToken(token); });
  daemon::WorkerServiceImpl worker_service(&jobs, access->get());
  worker_service.set_limits(limits);
  worker_service.set_heartbeat_schedule(&heartbeats);
  int port = addresses == 1 ? 0 : FreeLoopbackPort();
  grpc::ServerBuilder builder;
  for (int a = 1; a <= addresses; ++a) {
    builder.AddListeningPort(absl::StrCat("127.0.0.", a, ":", port),
                             grpc::InsecureServerCredentials(), a == 1 ? &port : nullptr);
  }
  builder.RegisterService(&worker_service);
  daemon::ConfigureWorkerServer(builder, limits);  // as horovodd
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cannot listen on 127.0.0.1\n");
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  jobs.set_worker_address(address);
  std::printf("ADDR %s\n", address.c_str());
  std::fflush(stdout);

  // Hosts named by address, so no name lookup is timed; `slots` workers each.
  v1::JobSpec spec;
  spec.add_argv("scale-bench-stand-in");
  spec.set_num_proc(workers);
  // Any loss leaves enough workers to go on: the benchmark times the new
  // generation reaching the survivors, whichever hosts they are on.
  spec.set_min_np(1);
  spec.set_max_np(workers);
  spec.set_elastic(true);
  for (int placed = 0, host = 0; placed < workers; placed += slots, ++host) {
    auto* h = spec.mutable_discovery()->add_hosts();
    h->set_host(absl::StrCat("10.", 1 + host / 65536, ".", (host / 256) % 256, ".", host % 256));
    h->set_slots(std::min(slots, workers - placed));
  }
  spec.mutable_discovery()->set_interval_seconds(1);
  spec.mutable_discovery()->set_script_timeout_seconds(10);
  spec.set_elastic_timeout_seconds(600);
  spec.set_start_timeout_seconds(600);
  spec.set_liveness_timeout_seconds(60);
  spec.set_blacklist_cooldown_min_seconds(10);
  spec.set_blacklist_cooldown_max_seconds(300);

  std::string command;
  double cpu_at_go_s = 0;
  std::string rss_at_go_kb = "0";
  while (std::getline(std::cin, command)) {
    absl::string_view line_view = command;
    if (command == "GO") {
      cpu_at_go_s = CpuSeconds();
      rss_at_go_kb = ProcStatus("VmRSS");
      auto id = jobs.Submit(spec);
      if (!id.ok()) {
        std::fprintf(stderr, "submit failed: %s\n", id.status().ToString().c_str());
        return 1;
      }
    } else if (absl::ConsumePrefix(&line_view, "KILL ")) {
      int64_t handle = 0;
      if (!absl::SimpleAtoi(line_view, &handle) || !launcher.Signal(handle, SIGKILL).ok()) {
        std::fprintf(stderr, "cannot kill worker %s\n", std::string(line_view).c_str());
      }
    } else if (command == "QUIT") {
      break;
    }
  }
  launcher.Drain();  // STATS must not interleave with a LAUNCH line
  // From the submit on: accepting the connections beforehand is not timed.
  const double cpu_s = CpuSeconds() - cpu_at_go_s;
  std::printf(
      "STATS rss_hwm_kb=%s rss_kb=%s rss_at_go_kb=%s threads=%s sockets=%d cpu_s=%.2f "
      "launch_span_s=%.3f ready_s=%.3f\n",
      ProcStatus("VmHWM").c_str(), ProcStatus("VmRSS").c_str(), rss_at_go_kb.c_str(),
      ProcStatus("Threads").c_str(), OpenSockets(), cpu_s, launcher.launch_span_s(),
      ready.ready_s());
  std::fflush(stdout);
  // Tearing down thousands of streams is not what is measured.
  _exit(0);
}

}  // namespace
}  // namespace horovodd::bench

int main(int argc, char** argv) {
  // stdout carries the protocol above; log lines (horovodd's code logs through
  // spdlog, to stdout by default) go to stderr.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("scale_daemon"));
  // As horovodd does (DaemonServer::Start): Debian's Abseil checks lock order
  // on every absl::Mutex lock (gRPC's too) unless told not to.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return horovodd::bench::Main(argc, argv);
}
