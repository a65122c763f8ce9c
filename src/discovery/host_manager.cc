#include "discovery/host_manager.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace horovodd::discovery {

absl::Status ValidateCooldownPolicy(const CooldownPolicy& policy) {
  if (policy.min < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cooldown min ", absl::FormatDuration(policy.min), " is negative"));
  }
  if (policy.max < policy.min) {
    return absl::InvalidArgumentError(
        absl::StrCat("cooldown max ", absl::FormatDuration(policy.max), " is below cooldown min ",
                     absl::FormatDuration(policy.min)));
  }
  return absl::OkStatus();
}

const char* HostStateName(HostState state) {
  switch (state) {
    case HostState::kUsable:
      return "usable";
    case HostState::kCooldown:
      return "cooldown";
    case HostState::kDrained:
      return "drained";
    case HostState::kLost:
      return "lost";
  }
  return "unknown";
}

HostManager::HostManager(CooldownPolicy policy) : policy_(policy) {}

HostDiff HostManager::UpdateDiscovered(const HostSet& hosts) {
  HostSet before;
  for (const auto& [host, record] : hosts_) {
    if (record.discovered) before.push_back({host, record.slots});
  }
  HostDiff diff = DiffHosts(before, hosts);

  for (const std::string& host : diff.removed) {
    Record& record = hosts_[host];
    record.discovered = false;
    record.last_change = next_change_++;
  }
  for (const HostSlots& h : hosts) {
    Record& record = hosts_[h.host];
    record.discovered = true;
    record.slots = h.slots;
  }
  // Hosts known before keep their places; new ones follow, in the order they are listed.
  std::vector<std::string> order;
  order.reserve(hosts.size());
  for (const std::string& host : order_) {
    if (hosts_.at(host).discovered) order.push_back(host);
  }
  for (const HostSlots& h : hosts) {
    if (std::find(order.begin(), order.end(), h.host) == order.end()) order.push_back(h.host);
  }
  order_ = std::move(order);
  ForgetOldLostHosts();
  return diff;
}

absl::Duration HostManager::CooldownAfter(int cooldowns) const {
  absl::Duration cooldown = policy_.min;
  // min * 2^cooldowns; doubling stops at max, so any count neither overflows nor loops long.
  for (int i = 0; i < cooldowns && cooldown < policy_.max; ++i) cooldown *= 2;
  return std::clamp(cooldown, policy_.min, policy_.max);
}

absl::Duration HostManager::ReportFailure(const std::string& host, const std::string& reason,
                                          absl::Time now) {
  Record& record = RecordOf(host);
  ++record.failures;
  record.last_failure = reason;
  record.last_change = next_change_++;
  if (record.cooldown_until <= now) {
    ++record.cooldowns;
    record.cooldown_until = now + CooldownAfter(record.cooldowns);
  }
  const absl::Duration left = record.cooldown_until - now;
  ForgetOldLostHosts();
  return left;
}

void HostManager::Drain(const std::string& host) {
  Record& record = RecordOf(host);
  record.drained = true;
  record.last_change = next_change_++;
  ForgetOldLostHosts();
}

void HostManager::RestoreFailures(const std::string& host, int failures, int cooldowns,
                                  std::string last_failure, absl::Time cooldown_until) {
  Record& record = RecordOf(host);
  record.failures = failures;
  record.cooldowns = cooldowns;
  record.last_failure = std::move(last_failure);
  record.cooldown_until = cooldown_until;
  record.last_change = next_change_++;
  ForgetOldLostHosts();
}

void HostManager::Undrain(const std::string& host) {
  auto it = hosts_.find(host);
  if (it != hosts_.end()) it->second.drained = false;
}

HostSet HostManager::UsableHosts(absl::Time now) const {
  HostSet usable;
  for (const std::string& host : order_) {
    const Record& record = hosts_.at(host);
    if (StateOf(record, now) == HostState::kUsable) usable.push_back({host, record.slots});
  }
  return usable;
}

HostInfo HostManager::InfoOf(const std::string& host, const Record& record, absl::Time now) const {
  HostInfo info;
  info.host = host;
  info.slots = record.slots;
  info.state = StateOf(record, now);
  info.cooldown_left = std::max(record.cooldown_until - now, absl::ZeroDuration());
  info.failures = record.failures;
  info.cooldowns = record.cooldowns;
  info.last_failure = record.last_failure;
  return info;
}

std::vector<HostInfo> HostManager::Hosts(absl::Time now) const {
  std::vector<HostInfo> infos;
  infos.reserve(hosts_.size());
  for (const std::string& host : order_) infos.push_back(InfoOf(host, hosts_.at(host), now));
  for (const auto& [host, record] : hosts_) {
    if (!record.discovered) infos.push_back(InfoOf(host, record, now));
  }
  return infos;
}

absl::Time HostManager::NextCooldownEnd(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [host, record] : hosts_) {
    // Only an end that makes a host usable is worth waking up for.
    if (record.discovered && !record.drained && record.cooldown_until > now) {
      next = std::min(next, record.cooldown_until);
    }
  }
  return next;
}

HostState HostManager::StateOf(const Record& record, absl::Time now) {
  if (!record.discovered) return HostState::kLost;
  if (record.drained) return HostState::kDrained;
  if (record.cooldown_until > now) return HostState::kCooldown;
  return HostState::kUsable;
}

HostManager::Record& HostManager::RecordOf(const std::string& host) {
  return hosts_.try_emplace(host).first->second;
}

void HostManager::ForgetOldLostHosts() {
  std::vector<std::pair<std::tuple<bool, uint64_t>, std::string>> lost;
  for (const auto& [host, record] : hosts_) {
    if (!record.discovered) lost.push_back({{record.drained, record.last_change}, host});
  }
  if (lost.size() <= kMaxRememberedLostHosts) return;
  std::sort(lost.begin(), lost.end());
  for (size_t i = 0; i + kMaxRememberedLostHosts < lost.size(); ++i) {
    hosts_.erase(lost[i].second);
  }
}

}  // namespace horovodd::discovery
