#include "daemon/service/systemd_notifier.h"

#include <cstdint>
#include <cstdlib>

#ifdef HVDD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace horovodd::daemon {
namespace {

void Notify(const std::string& state) {
#ifdef HVDD_HAVE_SYSTEMD
  sd_notify(/*unset_environment=*/0, state.c_str());
#endif
}

// The keep-alive interval systemd wants (WATCHDOG_USEC), or zero.
std::chrono::microseconds WatchdogInterval() {
#ifdef HVDD_HAVE_SYSTEMD
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0) {
    return std::chrono::microseconds(usec);
  }
#endif
  return std::chrono::microseconds(0);
}

}  // namespace

bool SystemdNotifier::Available() {
#ifdef HVDD_HAVE_SYSTEMD
  return true;
#else
  return false;
#endif
}

bool SystemdNotifier::Requested() { return std::getenv("NOTIFY_SOCKET") != nullptr; }

SystemdNotifier::~SystemdNotifier() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
}

void SystemdNotifier::Ready(const std::string& status, std::function<void()> probe) {
  Notify("READY=1\nSTATUS=" + status);
  const auto interval = WatchdogInterval();
  if (interval.count() > 0 && !watchdog_.joinable()) {
    watchdog_ =
        std::thread([this, interval, probe = std::move(probe)] { Watchdog(interval, probe); });
  }
}

void SystemdNotifier::Stopping(const std::string& status) {
  Notify("STOPPING=1\nSTATUS=" + status);
}

void SystemdNotifier::Watchdog(std::chrono::microseconds interval, std::function<void()> probe) {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.Unlock();
    if (probe) probe();
    Notify("WATCHDOG=1");
    mu_.Lock();
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(interval / 2));
  }
}

}  // namespace horovodd::daemon
