// The daemon's view of every host of a job: discovered or lost, cooling down after failures
// (Horovod's blacklist with --blacklist-cooldown-range), drained by an operator.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "discovery/host_diff.h"
#include "discovery/host_set.h"

namespace horovodd::discovery {

// Horovod's blacklist cooldown (--blacklist-cooldown-range LO HI): the n-th time a host is
// blacklisted it sits out min * 2^n, kept within [min, max] (so 2 * min the first time).
// Horovod adds a random jitter of up to `min`; this does not, so the cooldown a user reads in
// the status is the one that runs. min = max = absl::InfiniteDuration() blacklists a failing
// host for good (Horovod's behaviour when no range is given).
struct CooldownPolicy {
  absl::Duration min = absl::Seconds(10);
  absl::Duration max = absl::Seconds(300);
};

// INVALID_ARGUMENT naming the field when min is negative or max is below min. Config loading
// calls this; HostManager expects a valid policy.
absl::Status ValidateCooldownPolicy(const CooldownPolicy& policy);

enum class HostState {
  kUsable,    // discovered, not drained, not cooling down
  kCooldown,  // discovered, benched after a failure until its cooldown ends
  kDrained,   // discovered, taken out by an operator until undrained
  kLost,      // not (or no longer) discovered
};
const char* HostStateName(HostState state);  // "usable" "cooldown" "drained" "lost"

struct HostInfo {
  std::string host;
  int slots = 0;  // as last discovered (0 if never discovered)
  HostState state = HostState::kUsable;
  absl::Duration cooldown_left;  // zero unless a cooldown is running (whatever the state)
  int failures = 0;              // failures reported so far, never reset
  int cooldowns = 0;             // times it was blacklisted (what the back-off counts)
  std::string last_failure;      // reason given with the latest failure
};

// Lost hosts remembered at most (their failure history and drain mark); beyond that the ones
// untouched longest are forgotten, drained ones last, so hostname churn cannot grow memory
// without bound.
inline constexpr size_t kMaxRememberedLostHosts = 1024;

// Not thread-safe: its owner (the job's elastic driver) serialises calls. Time is passed in,
// so the owner decides the clock and tests need no sleeps.
class HostManager {
 public:
  explicit HostManager(CooldownPolicy policy);

  // Replaces the discovered set; returns the raw diff of discovered hosts (whatever their
  // state). Hosts no longer discovered become lost but keep their history.
  HostDiff UpdateDiscovered(const HostSet& hosts);

  // A worker on `host` failed: unless its cooldown is already running (several workers of
  // one host failing together are one incident, as in Horovod), the host is blacklisted for
  // the next cooldown of the policy, counted from `now`. Workers already running there are
  // not affected (the caller decides). A host never discovered is remembered as lost, so the
  // cooldown applies if it appears. Returns the cooldown that runs from now on.
  absl::Duration ReportFailure(const std::string& host, const std::string& reason, absl::Time now);

  // Takes `host` out of the usable set until Undrain, even across loss and rediscovery. A
  // host not yet discovered may be drained ahead of time.
  void Drain(const std::string& host);
  void Undrain(const std::string& host);  // no-op unless drained

  // Gives `host` the failure history a checkpoint kept, for a restarted daemon taking its
  // job back: its counts and the cooldown running until `cooldown_until`
  // (absl::InfinitePast(): none; absl::InfiniteFuture(): blacklisted for good). A host not
  // discovered yet is remembered as lost, as ReportFailure does.
  void RestoreFailures(const std::string& host, int failures, int cooldowns,
                       std::string last_failure, absl::Time cooldown_until);

  // Discovered hosts that are neither in cooldown nor drained, as of `now`, in assignment
  // order: the order they were first listed in, a host discovered later after the ones known
  // before it (Horovod's order_available_hosts), so the oldest hosts keep the lowest ranks.
  HostSet UsableHosts(absl::Time now) const;

  // Every host known with its state: the discovered ones in assignment order, then the ones
  // remembered as lost, by name.
  std::vector<HostInfo> Hosts(absl::Time now) const;

  // When the next cooldown of a discovered, undrained host ends after `now`
  // (absl::InfiniteFuture() if none): the owner wakes then to use the host again.
  absl::Time NextCooldownEnd(absl::Time now) const;

 private:
  struct Record {
    int slots = 0;
    bool discovered = false;
    bool drained = false;
    int failures = 0;
    int cooldowns = 0;
    std::string last_failure;
    absl::Time cooldown_until = absl::InfinitePast();
    uint64_t last_change = 0;  // sequence number of its last loss, failure or drain
  };

  absl::Duration CooldownAfter(int cooldowns) const;
  HostInfo InfoOf(const std::string& host, const Record& record, absl::Time now) const;
  static HostState StateOf(const Record& record, absl::Time now);
  Record& RecordOf(const std::string& host);  // creates a lost record if needed
  // Keeps at most kMaxRememberedLostHosts lost hosts; may erase any lost record, so callers
  // run it last, after they are done with their Record reference.
  void ForgetOldLostHosts();

  const CooldownPolicy policy_;
  std::map<std::string, Record> hosts_;
  std::vector<std::string> order_;  // the discovered hosts, in assignment order
  uint64_t next_change_ = 0;
};

}  // namespace horovodd::discovery
