// The pure rules of elastic membership: who is in the next generation, and
// which ranks everyone gets. No I/O, no clocks: the driver feeds them facts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace horovodd::daemon {

struct Member {
  int64_t worker_id = 0;
  std::string host;
  bool operator==(const Member& o) const { return worker_id == o.worker_id && host == o.host; }
};

struct PlanInput {
  std::vector<Member> current;  // current generation, in rank order
  std::set<int64_t> lost;       // workers that exited or were declared lost
  // host -> slots where workers may stay: discovered, not drained (blacklisted ones too).
  std::map<std::string, int> discovered;
  // Hosts in cooldown after a failure (Horovod's blacklist): their workers leave, unless
  // that would leave no survivor at all.
  std::set<std::string> blacklisted;
  // (host, slots) new workers may use, in assignment order (the order ranks are given in).
  std::vector<std::pair<std::string, int>> usable;
  int max_size = 0;  // 0 = no limit
  // Hot spares (horovodrun --hot-spares): the spares alive, best first (ready ones before
  // those still starting); how many the job keeps; and the size the job had (its newest
  // plan's, or -np before the first), which a spare restores before any slot goes to a new
  // spare. Spares sit on usable slots beyond the job's and do not count toward max_size.
  std::vector<Member> spares;
  int hot_spares = 0;
  int keep_size = 0;
};

struct Plan {
  std::vector<Member> survivors;  // kept, in their old rank order
  std::vector<int64_t> removed;   // alive but leaving (slot or host gone, blacklisted)
  // The removed workers that leave because their host is blacklisted.
  std::vector<int64_t> left_blacklisted;
  // Survivors on blacklisted hosts kept because removing them would leave no survivor (see
  // PlanGeneration).
  bool kept_on_blacklisted = false;
  // Spares that join, in rank order after the survivors, before the new workers.
  std::vector<Member> promoted;
  std::vector<std::string> new_hosts;  // one entry per worker to start, in rank order
  // Spares that leave (their host is blacklisted, drained or gone, or has no slot left for
  // them), and the hosts of the spares to start, one entry each.
  std::vector<int64_t> spares_removed;
  std::vector<std::string> spare_hosts;
  // Spares the job keeps after this plan (those staying and those to start); fewer than
  // PlanInput::hot_spares when the usable slots do not allow more.
  int spares = 0;
  int size() const {
    return static_cast<int>(survivors.size() + promoted.size() + new_hosts.size());
  }
  // Nothing changes: no generation needed.
  bool unchanged(size_t current_size) const {
    return removed.empty() && promoted.empty() && new_hosts.empty() &&
           survivors.size() == current_size;
  }
};

// Survivors keep their order (so rank 0 stays on a surviving worker when one
// survives); workers on hosts that lost slots leave from the highest rank on
// that host down; workers on blacklisted hosts leave, as in Horovod, except
// when every survivor is on one (a single-host job, say): then they stay, where
// Horovod would fail with "No hosts from previous set remaining, unable to
// broadcast state"; new workers fill free usable slots host by host, in
// assignment order, appended after the survivors, up to max_size.
// With hot spares, the job's size is the larger of keep_size and what the
// usable slots allow once hot_spares of them are set aside (at most
// max_size), and a place it has to fill goes to a spare first (ready ones
// first), then to a new worker; what is left of the slots holds up to
// hot_spares spares, each new one on a host without a member if there is
// one, else on the emptiest host.
Plan PlanGeneration(const PlanInput& input);

struct RankInfo {
  int rank = 0, size = 0;
  int local_rank = 0, local_size = 0;
  int cross_rank = 0, cross_size = 0;
};

// Horovod's rank layout for workers placed on `hosts_by_rank`: local rank is
// the index among workers of the same host (in rank order); cross rank is the
// index of the host among hosts that have a worker with that local rank.
std::vector<RankInfo> AssignRanks(const std::vector<std::string>& hosts_by_rank);

// The ranks of `previous` (worker ids by rank) that `next` leaves out, when
// `next` is `previous` without them and everyone else in the same order (then
// workers may shrink their NCCL communicator instead of building a new one);
// nullopt when a worker was added or the order changed, or a list is empty.
// The same members in the same order give an empty list.
std::optional<std::vector<int>> RemovedRanks(const std::vector<int64_t>& previous,
                                             const std::vector<int64_t>& next);

}  // namespace horovodd::daemon
