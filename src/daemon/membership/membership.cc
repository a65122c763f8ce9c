#include "daemon/membership/membership.h"

namespace horovodd::daemon {

Plan PlanGeneration(const PlanInput& input) {
  Plan plan;
  std::vector<Member> alive;
  for (const auto& m : input.current) {
    if (!input.lost.count(m.worker_id)) alive.push_back(m);
  }
  // Per host, keep at most its discovered slots, dropping the highest ranks.
  std::map<std::string, int> kept_on_host;
  std::map<std::string, int> alive_on_host;
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
  // Fill free usable slots, host by host.
  for (const auto& [host, slots] : input.usable) {
    int free = slots - kept_on_host[host];
    for (int i = 0; i < free; ++i) {
      if (input.max_size > 0 && plan.size() >= input.max_size) return plan;
      plan.new_hosts.push_back(host);
    }
  }
  return plan;
}

std::vector<RankInfo> AssignRanks(const std::vector<std::string>& hosts_by_rank) {
  const int size = static_cast<int>(hosts_by_rank.size());
  std::vector<RankInfo> out(size);
  std::map<std::string, int> local_count;
  for (int r = 0; r < size; ++r) {
    out[r].rank = r;
    out[r].size = size;
    out[r].local_rank = local_count[hosts_by_rank[r]]++;
  }
  // Hosts in order of their first rank; cross rank counts hosts having this
  // local rank before this one.
  std::map<int, int> hosts_with_local_rank;
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
