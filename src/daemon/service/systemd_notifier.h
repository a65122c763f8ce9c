// horovodd's side of systemd's Type=notify protocol (sd_notify(3)): READY=1
// once it serves, STOPPING=1 when it begins to stop, and WATCHDOG=1
// keep-alives at half the interval the unit's WatchdogSec= asks for.
// Does nothing when horovodd was not started by systemd (no $NOTIFY_SOCKET),
// or was built without libsystemd (Available() is then false).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {

class SystemdNotifier {
 public:
  // Whether this build can talk to systemd at all.
  static bool Available();
  // Whether systemd asked for notifications ($NOTIFY_SOCKET is set).
  static bool Requested();

  SystemdNotifier() = default;
  ~SystemdNotifier();  // stops the watchdog

  // Sends READY=1 with STATUS=`status`, then starts the watchdog when the
  // unit has one: before each keep-alive it calls `probe`, so a daemon whose
  // core is stuck (probe does not return) stops sending them and systemd
  // restarts it.
  void Ready(const std::string& status, std::function<void()> probe);
  // STOPPING=1 with STATUS=`status`; keep-alives go on until destruction,
  // since stopping (ending jobs) takes a while.
  void Stopping(const std::string& status);

 private:
  void Watchdog(std::chrono::microseconds interval, std::function<void()> probe)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // the watchdog Awaits it
  std::thread watchdog_;
};

}  // namespace horovodd::daemon
