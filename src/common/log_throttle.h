// At most one log line per key and interval, so a client hammering the daemon
// with bad credentials cannot flood its log; the lines left out are counted
// and reported with the next one. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace horovodd::daemon {

class LogThrottle {
 public:
  explicit LogThrottle(absl::Duration interval) : interval_(interval) {}

  // Whether a line for `key` may be logged at `now`: the number of lines for
  // it left out since the last one logged (0 for the first), or nullopt to
  // leave this one out too.
  std::optional<uint64_t> Admit(const std::string& key, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct KeyState {
    absl::Time last_logged = absl::InfinitePast();
    uint64_t left_out = 0;
  };
  const absl::Duration interval_;
  absl::Mutex mu_;
  std::map<std::string, KeyState> keys_ ABSL_GUARDED_BY(mu_);  // one per refusal reason
};

}  // namespace horovodd::daemon
