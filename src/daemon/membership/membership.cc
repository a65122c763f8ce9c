#include "daemon/membership/membership.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace horovodd::daemon {
namespace {

// Counts per host, looked up for every worker of a plan: hashed, as their
// order never matters.
using HostCounts = absl::flat_hash_map<std::string, int>;

}  // namespace

Plan PlanGeneration(const PlanInput& input) {
  Plan plan;
  std::vector<Member> alive;
  for (const auto& m : input.current) {
    if (!input.lost.count(m.worker_id)) alive.push_back(m);
  }
  // Per host, keep at most its discovered slots, dropping the highest ranks.
  HostCounts kept_on_host;
  HostCounts alive_on_host;
  for (const auto& m : alive) alive_on_host[m.host]++;
  std::vector<bool> keep(alive.size(), true);
  for (size_t i = alive.size(); i-- > 0;) {
    const auto& host = alive[i].host;
    auto slots_it = input.discovered.find(host);
    int slots = slots_it == input.discovered.end() ? 0 : slots_it->second;
    if (alive_on_host[host] > slots) {
      keep[i] = false;
      alive_on_host[host]--;
    }
  }
  // Blacklisted hosts' workers leave too, unless nobody would be left to carry
  // the training state on.
  bool survivor_elsewhere = false;
  for (size_t i = 0; i < alive.size(); ++i) {
    if (keep[i] && !input.blacklisted.count(alive[i].host)) survivor_elsewhere = true;
  }
  std::vector<bool> blacklisted_leaver(alive.size(), false);
  for (size_t i = 0; i < alive.size(); ++i) {
    if (!keep[i] || !input.blacklisted.count(alive[i].host)) continue;
    if (survivor_elsewhere) {
      keep[i] = false;
      blacklisted_leaver[i] = true;
    } else {
      plan.kept_on_blacklisted = true;
    }
  }
  for (size_t i = 0; i < alive.size(); ++i) {
    if (!keep[i]) continue;
    if (input.max_size > 0 && static_cast<int>(plan.survivors.size()) >= input.max_size) {
      keep[i] = false;
      continue;
    }
    plan.survivors.push_back(alive[i]);
    kept_on_host[alive[i].host]++;
  }
  for (size_t i = 0; i < alive.size(); ++i) {
    if (keep[i]) continue;
    plan.removed.push_back(alive[i].worker_id);
    if (blacklisted_leaver[i]) plan.left_blacklisted.push_back(alive[i].worker_id);
  }
  // Spares stay where their host still has a usable slot beyond the survivors'.
  HostCounts usable_slots(input.usable.begin(), input.usable.end());
  std::vector<Member> spares;
  for (const Member& s : input.spares) {
    if (kept_on_host[s.host] < usable_slots[s.host]) {
      kept_on_host[s.host]++;
      spares.push_back(s);
    } else {
      plan.spares_removed.push_back(s.worker_id);
    }
  }
  HostCounts free_on_host;
  int free = 0;
  for (const auto& [host, slots] : input.usable) {
    free_on_host[host] = std::max(0, slots - kept_on_host[host]);
    free += free_on_host[host];
  }
  // The size: the survivors', raised to keep_size and to what the slots allow beside
  // hot_spares spares, within max_size and the slots there are.
  const int room = static_cast<int>(plan.survivors.size() + spares.size()) + free;
  int size = std::max(input.keep_size, room - input.hot_spares);
  if (input.max_size > 0) size = std::min(size, input.max_size);
  size = std::max(std::min(size, room), static_cast<int>(plan.survivors.size()));
  size_t next_spare = 0;
  while (plan.size() < size && next_spare < spares.size()) {
    plan.promoted.push_back(spares[next_spare++]);
  }
  // Fill free usable slots, host by host.
  for (const auto& [host, slots] : input.usable) {
    for (; free_on_host[host] > 0 && plan.size() < size; --free_on_host[host], --free) {
      plan.new_hosts.push_back(host);
    }
  }
  // What is left holds the spares.
  const int wanted = std::min(input.hot_spares, room - size);
  while (static_cast<int>(spares.size() - next_spare) > wanted) {
    plan.spares_removed.push_back(spares.back().worker_id);
    spares.pop_back();
  }
  plan.spares = wanted;
  HostCounts members_on_host;
  HostCounts processes_on_host;
  for (const Member& m : plan.survivors) members_on_host[m.host]++;
  for (const Member& m : plan.promoted) members_on_host[m.host]++;
  for (const std::string& host : plan.new_hosts) members_on_host[host]++;
  for (const auto& [host, count] : members_on_host) processes_on_host[host] = count;
  for (size_t i = next_spare; i < spares.size(); ++i) processes_on_host[spares[i].host]++;
  for (int i = static_cast<int>(spares.size() - next_spare); i < wanted; ++i) {
    // A host without a member first (a host failure then takes no spare with it), then the
    // emptiest, then the first in assignment order.
    const std::string* best = nullptr;
    auto better = [&](const std::string& a, const std::string& b) {
      const bool a_free = members_on_host[a] == 0, b_free = members_on_host[b] == 0;
      if (a_free != b_free) return a_free;
      return processes_on_host[a] < processes_on_host[b];
    };
    for (const auto& [host, slots] : input.usable) {
      if (free_on_host[host] > 0 && (best == nullptr || better(host, *best))) best = &host;
    }
    if (best == nullptr) break;
    free_on_host[*best]--;
    processes_on_host[*best]++;
    plan.spare_hosts.push_back(*best);
  }
  return plan;
}

std::vector<RankInfo> AssignRanks(const std::vector<std::string>& hosts_by_rank) {
  const int size = static_cast<int>(hosts_by_rank.size());
  std::vector<RankInfo> out(size);
  HostCounts local_count;
  for (int r = 0; r < size; ++r) {
    out[r].rank = r;
    out[r].size = size;
    out[r].local_rank = local_count[hosts_by_rank[r]]++;
  }
  // Hosts in order of their first rank; cross rank counts hosts having this
  // local rank before this one.
  absl::flat_hash_map<int, int> hosts_with_local_rank;
  for (int r = 0; r < size; ++r) {
    out[r].local_size = local_count[hosts_by_rank[r]];
    out[r].cross_rank = hosts_with_local_rank[out[r].local_rank]++;
  }
  for (int r = 0; r < size; ++r) {
    out[r].cross_size = hosts_with_local_rank[out[r].local_rank];
  }
  return out;
}

std::optional<std::vector<int>> RemovedRanks(const std::vector<int64_t>& previous_ids,
                                             const std::vector<int64_t>& next_ids) {
  if (previous_ids.empty() || next_ids.empty() || next_ids.size() > previous_ids.size()) {
    return std::nullopt;
  }
  // Walk both lists once: every next id must appear in previous, in order;
  // the previous ranks skipped on the way are the excluded ones.
  std::vector<int> excluded;
  size_t next = 0;
  for (size_t previous = 0; previous < previous_ids.size(); ++previous) {
    if (next < next_ids.size() && previous_ids[previous] == next_ids[next]) {
      ++next;
    } else {
      excluded.push_back(static_cast<int>(previous));
    }
  }
  if (next != next_ids.size()) return std::nullopt;  // an added or reordered worker
  return excluded;
}

}  // namespace horovodd::daemon
