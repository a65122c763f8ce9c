// A job's stall settings, as the daemon applies them: Horovod's stall check
// (--stall-check-warning-time-seconds, --stall-check-shutdown-time-seconds,
// --no-stall-check) read from the variables its workers get, and horovodd's
// own eviction rules (the default eviction time of an elastic job, and
// --evict-stragglers).
#pragma once

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

struct StallSettings {
  // An elastic job whose stall lasts this long without Horovod's shutdown
  // time set has its culprits evicted: minutes, so that no legitimately slow
  // collective (a large checkpoint broadcast, a first NCCL connect) is cut
  // short, yet far below the 30 minutes of a collective timeout.
  static constexpr absl::Duration kDefaultElasticEviction = absl::Minutes(5);
  // The variable that tells a worker the daemon acts on its stalls: its own
  // stall check then warns and never shuts down (engine_stall.h).
  static constexpr char kDaemonActsVariable[] = "HOROVODD_STALL_SHUTDOWN_BY_DAEMON";

  bool enabled = true;                             // not --no-stall-check
  absl::Duration warning = absl::Seconds(60);      // culprits are named after it
  absl::Duration shutdown = absl::ZeroDuration();  // Horovod's; zero: not set
  // When the daemon acts on a stall (from its first waiter): evicts the
  // culprits of an elastic job, fails a fixed-size one. Infinite: never.
  absl::Duration act_after = absl::InfiniteDuration();
  // --evict-stragglers; 0: off.
  double evict_stragglers = 0;

  // Looks a variable up in the daemon's own environment (which its local
  // workers inherit); nullptr when unset.
  using Lookup = std::function<const char*(const char*)>;
  // The settings of `spec`'s job: each variable from spec.env, else from
  // `lookup`, as its workers see them. A value that is not a non-negative
  // number keeps Horovod's default (the workers refuse to start with it).
  static StallSettings ForJob(const v1::JobSpec& spec, const Lookup& lookup);

  // "warning 60s, eviction after 300s" for the job's first event.
  std::string Describe(bool elastic) const;
};

}  // namespace horovodd::daemon
