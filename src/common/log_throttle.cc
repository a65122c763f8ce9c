#include "common/log_throttle.h"

namespace horovodd::daemon {

std::optional<uint64_t> LogThrottle::Admit(const std::string& key, absl::Time now) {
  absl::MutexLock lock(&mu_);
  KeyState& state = keys_[key];
  if (now - state.last_logged < interval_) {
    ++state.left_out;
    return std::nullopt;
  }
  state.last_logged = now;
  const uint64_t left_out = state.left_out;
  state.left_out = 0;
  return left_out;
}

}  // namespace horovodd::daemon
