// The supervisor of one job's workers on one host (horovodd-shim's core).
// It starts workers as its own children (through a LocalLauncher, so each
// runs in its own process group and dies with the shim), keeps their output
// lines while no daemon reads them (a bounded buffer: the oldest lines are
// dropped and counted), keeps every exit status until a daemon released it,
// and serves one daemon at a time on its unix socket (shim_protocol.h; a
// newer one whose Hello is accepted replaces the one in place). A
// daemon that goes away takes nothing with it: the workers run on, and the
// next daemon to say Hello gets the workers, the buffered output and the
// exit statuses.
//
// Lifetime: while a worker runs, the shim stays. Once none runs it ends when
// a daemon that had connected leaves with every exit status released, or
// after `idle_timeout` with no daemon connected (statuses nobody came for
// are logged and lost).
//
// Threads: Run() owns the sockets (the listener, the one daemon connection,
// a wake-up eventfd, an optional signalfd). The launcher's I/O thread runs
// the worker callbacks, which queue events under mu_ and wake Run().
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/shim_protocol/shim_protocol.h"
#include "daemon/shim_relay/host_relay.h"
#include "shim.pb.h"

namespace horovodd::shim {

using daemon::UniqueFd;

struct ShimServerOptions {
  std::string job_id;  // a Hello naming another job is refused
  // With no worker running and no daemon connected, the shim ends after this.
  absl::Duration idle_timeout = absl::Minutes(10);
  // The output kept while the daemon does not read it (lines and bytes).
  size_t max_buffered_lines = 20000;
  size_t max_buffered_bytes = 16 << 20;
  // Relay the workers' daemon traffic (shim_relay/host_relay.h): one
  // AttachHost stream to the daemon for all of them, their
  // HOROVODD_DAEMON_ADDR pointed at the relay. Also on for a launch whose
  // environment says HOROVODD_SHIM_RELAY=1.
  bool relay = false;
};

class ShimServer {
 public:
  // `listener` is a listening unix socket (ListenUnix); `signals` an optional
  // signalfd: SIGTERM/SIGINT are forwarded to every worker, SIGHUP ignored.
  static absl::StatusOr<std::unique_ptr<ShimServer>> Create(ShimServerOptions options,
                                                            UniqueFd listener,
                                                            UniqueFd signals = UniqueFd());
  ~ShimServer();  // kills (SIGKILL) whatever still runs

  // Serves until the lifetime rule above says the shim is done, or Stop().
  void Run();
  // Ends Run() soon; any thread.
  void Stop();
  // Sends `sig` to every running worker's process group; any thread.
  void SignalAll(int sig);

 private:
  struct Worker {
    pid_t pid = 0;  // 0 while its launch is on the way
    bool exited = false;
    v1::ExitStatus status;
  };

  ShimServer(ShimServerOptions options, UniqueFd listener, UniqueFd signals, UniqueFd wake,
             std::unique_ptr<daemon::LocalLauncher> launcher);

  // Run()'s thread.
  void Accept();
  void Disconnect(const char* why);
  static bool ReadAvailable(int fd, FrameReader& reader);
  void ReadFromCandidate();
  void ReadFromDaemon();
  void HandleFrames();
  void Handle(const v1::ShimRequest& request);
  void Greet(const v1::Hello& hello);
  void HandleLaunch(const v1::Launch& launch);
  // Points `env` at the relay (started by the first launch that asks for
  // it) when this launch is relayed; a launch it cannot relay dials the
  // daemon itself.
  void RelayWorker(std::map<std::string, std::string>& env);
  void MoveQueuedToWire();
  void FlushWire();
  void HandleSignals();
  bool ShouldEnd(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Launcher thread.
  void OnLine(int64_t worker_id, daemon::OutputStream stream, std::string_view line);
  void OnExit(int64_t worker_id, const daemon::ExitInfo& exit);
  void QueueLocked(v1::ShimEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  const ShimServerOptions options_;
  const UniqueFd listener_;
  const UniqueFd signals_;
  const UniqueFd wake_;

  // Run()'s thread only.
  UniqueFd candidate_;  // connected, its Hello not read yet
  FrameReader candidate_reader_;
  UniqueFd daemon_;          // the greeted daemon, if any
  bool greeted_ = false;     // its Hello was accepted
  bool had_daemon_ = false;  // a daemon was greeted at some point
  FrameReader reader_;
  std::string wire_;            // encoded frames not yet written
  absl::Time idle_since_;       // when the shim last had no daemon
  std::string worker_token_;    // from the first launch's environment
  std::string daemon_address_;  // what its workers dial, from the same

  absl::Mutex mu_;
  std::map<int64_t, Worker> workers_ ABSL_GUARDED_BY(mu_);  // until released
  // Events for the daemon, in order: Output (dropped oldest-first when full)
  // and, while a daemon is greeted, Exited.
  std::deque<v1::ShimEvent> queued_ ABSL_GUARDED_BY(mu_);
  size_t queued_output_lines_ ABSL_GUARDED_BY(mu_) = 0;
  size_t queued_output_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_pending_ ABSL_GUARDED_BY(mu_) = 0;  // for the next line queued
  bool connected_ ABSL_GUARDED_BY(mu_) = false;        // mirrors greeted_, for OnExit
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;

  // Run()'s thread creates it; it outlives the workers (destroyed after
  // launcher_), so none loses its relay before it ends.
  std::unique_ptr<HostRelay> relay_;
  std::string relay_upstream_;  // the daemon address relay_ dials
  // Last: its destructor kills and reaps the workers, running OnExit.
  std::unique_ptr<daemon::LocalLauncher> launcher_;
};

}  // namespace horovodd::shim
