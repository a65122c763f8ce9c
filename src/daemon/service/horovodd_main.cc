// horovodd: the long-running daemon. Reads its config (--config, flags
// override keys), serves jobs until SIGTERM/SIGINT or `horovodctl stop`, then leaves the running
// jobs to the next horovodd on the same state dir (their local workers run
// under horovodd-shim), or with shutdown.stop_jobs ends every job with a
// recorded reason, and exits 0. Under systemd (Type=notify) it says when it
// is ready and stopping, and sends watchdog keep-alives.
//
// Exit codes: 0 stopped by a signal, 1 could not start (address in use,
// unusable state dir), 2 bad command line or config file.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/log.h"
#include "daemon/config/auth_config.h"
#include "daemon/config/daemon_config.h"
#include "daemon/service/daemon_server.h"
#include "daemon/service/logging.h"
#include "daemon/service/systemd_notifier.h"

namespace {

using horovodd::daemon::DaemonConfig;
using horovodd::daemon::DaemonFlags;

constexpr int kBadUsage = 2;
constexpr int kDeposed = 75;  // EX_TEMPFAIL: another horovodd leads now

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// horovodd-shim beside this executable (bin/ in the build tree and when
// installed); empty when there is none.
std::string ShimNextToUs() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "";
  const std::filesystem::path shim = self.parent_path() / "horovodd-shim";
  return access(shim.c_str(), X_OK) == 0 ? shim.string() : "";
}

int Fail(int code, absl::string_view message) {
  std::cerr << "horovodd: error: " << message << std::endl;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "horovodd: the elastic training daemon. Runs jobs submitted by horovodrun, "
      "keeping each between its min and max workers as hosts come and go."};
  std::string config_path;
  std::string listen, state_dir, store, metrics_listen, status_page_listen, log_level, log_format;
  app.add_option("--config", config_path,
                 "YAML config file (config/horovodd.yaml documents every key); the flags "
                 "below override its keys");
  app.add_option("--listen", listen,
                 "host:port of the gRPC API (port 0 picks a free one) [127.0.0.1:7451]");
  app.add_option("--state-dir", state_dir,
                 "directory of the job records (horovodd.db), created if missing; \"\" keeps "
                 "none [/var/lib/horovodd]");
  app.add_option("--store", store,
                 "where job records are kept: \"\" for horovodd.db in the state dir, or "
                 "etcd://host:port,host:port,... for an etcd cluster (etcd.* keys) [\"\"]");
  app.add_option("--metrics-listen", metrics_listen,
                 "host:port serving GET /metrics (Prometheus); \"\" turns it off "
                 "[127.0.0.1:9464]");
  app.add_option("--status-page-listen", status_page_listen,
                 "host:port serving the status page (a browser's view of the jobs; the "
                 "viewer or admin token, TLS as --tls-*); \"\" turns it off [\"\"]");
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error [info]");
  app.add_option("--log-format", log_format, "text or json (one object per line) [text]");
  // One flag per auth.* and tls.* config key (auth_config.cc).
  std::map<std::string, std::string> security_values;
  std::map<std::string, bool> security_switches;
  for (const auto& key : horovodd::daemon::SecurityKeys()) {
    if (key.is_switch) {
      app.add_flag(key.flag, security_switches[key.flag], key.help);
    } else {
      app.add_option(key.flag, security_values[key.flag], key.help);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return Fail(kBadUsage, e.what());
  }

  DaemonConfig config;
  if (!config_path.empty()) {
    auto loaded = horovodd::daemon::LoadDaemonConfig(config_path);
    if (!loaded.ok()) return Fail(kBadUsage, loaded.status().message());
    config = *loaded;
  }
  DaemonFlags flags;
  if (app.count("--listen")) flags.listen = listen;
  if (app.count("--state-dir")) flags.state_dir = state_dir;
  if (app.count("--store")) flags.store = store;
  if (app.count("--metrics-listen")) flags.metrics_listen = metrics_listen;
  if (app.count("--status-page-listen")) flags.status_page_listen = status_page_listen;
  if (app.count("--log-level")) flags.log_level = log_level;
  if (app.count("--log-format")) flags.log_format = log_format;
  for (const auto& [flag, value] : security_values) {
    if (app.count(flag)) flags.security[flag] = value;
  }
  for (const auto& [flag, on] : security_switches) {
    if (app.count(flag)) flags.security[flag] = on ? "true" : "false";
  }
  if (auto st = horovodd::daemon::ApplyDaemonFlags(flags, config); !st.ok()) {
    return Fail(kBadUsage, st.message());
  }
  if (auto st = horovodd::daemon::ConfigureLogging(config.log_level, config.log_format); !st.ok()) {
    return Fail(kBadUsage, st.message());
  }

  horovodd::daemon::RaiseOpenFileLimit(config.limits.max_workers_per_job);

  // Block the termination signals in every thread; main waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  // Workers inherit the daemon's environment, and a job's own -x wins over
  // it: so worker.daemon_grace reaches them unless the job says otherwise.
  // Set before any thread starts.
  // An operator's (or a test's) HOROVODD_DAEMON_GRACE_S wins over the key.
  double grace_seconds = 0;
  if (const char* grace = getenv("HOROVODD_DAEMON_GRACE_S");
      grace != nullptr && absl::SimpleAtod(grace, &grace_seconds) && grace_seconds > 0) {
    config.worker_daemon_grace = absl::Seconds(grace_seconds);
  } else {
    setenv("HOROVODD_DAEMON_GRACE_S",
           absl::StrCat(absl::ToDoubleSeconds(config.worker_daemon_grace)).c_str(), 1);
  }

  horovodd::daemon::DaemonOptions options;
  options.listen_address = config.listen;
  options.shim_binary = config.shim_binary.empty() ? ShimNextToUs() : config.shim_binary;
  if (!config.state_dir.empty() && options.shim_binary.empty()) {
    HVDD_LOG(WARNING) << "no horovodd-shim next to horovodd: local workers are this daemon's "
                         "children and end with it (set shim.binary)";
  }
  options.leave_jobs_running = !config.stop_jobs_on_shutdown;
  options.worker_grace = config.worker_daemon_grace;
  options.state_dir = config.state_dir;
  options.store = config.store;
  options.etcd = config.etcd;
  options.metrics_listen = config.metrics_listen;
  options.status_page_listen = config.status_page_listen;
  options.limits = config.limits;
  options.auth = config.auth;
  options.tls = config.tls;
  options.log_job_events = true;
  options.stoppable_over_rpc = true;  // horovodctl stop
  // Scripts and tests read these two lines to find the daemon.
  const auto say_listening = [](const std::string& address) {
    std::cout << "horovodd listening on " << address << std::endl;
  };
  // With an etcd store, several horovodd share it: this one serves as a
  // standby until it leads (issue 36).
  horovodd::daemon::Leadership leadership;
  if (!options.store.empty()) {
    auto led = horovodd::daemon::DaemonServer::StandBy(options, say_listening);
    if (absl::IsCancelled(led.status())) {
      HVDD_LOG(INFO) << led.status().message();
      return 0;
    }
    if (!led.ok()) {
      HVDD_LOG(ERROR) << "cannot start: " << led.status().message();
      return 1;
    }
    leadership = std::move(*led);
  }
  const bool stood_by = leadership.stood_by;
  auto started = horovodd::daemon::DaemonServer::Start(options, std::move(leadership));
  if (!started.ok()) {
    HVDD_LOG(ERROR) << "cannot start: " << started.status().message();
    return 1;
  }
  auto& daemon = **started;

  if (!stood_by) say_listening(daemon.address());
  if (!daemon.metrics_address().empty()) {
    std::cout << "horovodd metrics on http://" << daemon.metrics_address() << "/metrics"
              << std::endl;
  }
  if (!daemon.status_page_url().empty()) {
    std::cout << "horovodd status page on " << daemon.status_page_url() << std::endl;
  }
  if (!config.store.empty()) {
    HVDD_LOG(INFO) << "job records in " << config.store << " under " << config.etcd.prefix << "; "
                   << daemon.recovered_jobs() << " jobs recovered from earlier runs";
  } else if (config.state_dir.empty()) {
    HVDD_LOG(WARNING) << "no state dir: job records are not kept across restarts";
  } else {
    HVDD_LOG(INFO) << "job records in " << config.state_dir << "; " << daemon.recovered_jobs()
                   << " jobs recovered from earlier runs";
  }
  // The path only: the token itself is never logged.
  if (daemon.admin_token_path().empty()) {
    HVDD_LOG(WARNING)
        << "no state dir and no auth.admin_token_file: the admin token exists only in memory, so "
           "nothing can submit jobs; set auth.admin_token_file";
  } else {
    HVDD_LOG(INFO) << "admin token in " << daemon.admin_token_path() << " (clients: --token-file "
                   << daemon.admin_token_path() << ")";
  }
  const std::string status = absl::StrCat(
      "serving on ", daemon.address(),
      daemon.metrics_address().empty() ? ""
                                       : absl::StrCat(", metrics on ", daemon.metrics_address()),
      daemon.status_page_url().empty()
          ? ""
          : absl::StrCat(", status page on ", daemon.status_page_url()));
  HVDD_LOG(INFO) << status;

  horovodd::daemon::SystemdNotifier systemd;
  if (horovodd::daemon::SystemdNotifier::Requested() &&
      !horovodd::daemon::SystemdNotifier::Available()) {
    HVDD_LOG(WARNING) << "systemd asked for readiness notification, but this horovodd was built "
                         "without libsystemd; run the unit as Type=simple";
  }
  // A job manager whose lock never frees stalls the probe, and with it the
  // watchdog keep-alives: systemd then restarts horovodd.
  systemd.Ready(status, [&daemon] { daemon.jobs().List(); });

  // A signal, or horovodctl stop (JobService.StopDaemon), whichever comes first. The
  // signal thread is left blocked in sigwait when the RPC wins; the process ends after.
  std::thread([&daemon] {
    const int sig = WaitForTerminationSignal();
    daemon.RequestStop(
        {absl::StrCat("horovodd stopped (", sig == SIGTERM ? "SIGTERM" : "SIGINT", ")"), false});
  }).detach();
  const horovodd::daemon::StopRequest stop = daemon.AwaitStop();
  const std::string& reason = stop.reason;
  if (stop.deposed) {
    // Another horovodd leads: it drives the jobs now. Exit 75 (EX_TEMPFAIL)
    // for systemd to start this one again, as a standby.
    systemd.Stopping(absl::StrCat(reason, ", leaving jobs to the new leader"));
    HVDD_LOG(ERROR) << reason << ": stepping down, leaving every job to the new leader";
    daemon.StepDown(reason);
    HVDD_LOG(INFO) << "stopped";
    return kDeposed;
  }
  const bool leaving = !stop.stop_jobs && options.leave_jobs_running &&
                       !options.shim_binary.empty() && !config.state_dir.empty();
  systemd.Stopping(absl::StrCat(reason, leaving ? ", leaving jobs running" : ", ending jobs"));
  HVDD_LOG(INFO) << reason << ": refusing new jobs, "
                 << (leaving ? "leaving running ones to the next horovodd" : "ending running ones");
  if (stop.stop_jobs) {
    daemon.ShutdownStoppingJobs(reason);
  } else {
    daemon.Shutdown(reason);
  }
  HVDD_LOG(INFO) << "stopped";
  return 0;
}
