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
    return absl::InvalidArgumentError(absl::StrCat("cooldown max ",
                                                   absl::FormatDuration(policy.max),
                                                   " is below cooldown min ",
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
  ForgetOldLostHosts();
  return diff;
}

absl::Duration HostManager::CooldownAfter(int failures) const {
  absl::Duration cooldown = policy_.min;
  // Doubling stops at max, so any number of failures neither overflows nor loops long.
  for (int i = 1; i < failures && cooldown < policy_.max; ++i) cooldown *= 2;
  return std::min(cooldown, policy_.max);
}

void HostManager::ReportFailure(const std::string& host, const std::string& reason,
                                absl::Time now) {
  Record& record = RecordOf(host);
  ++record.failures;
  record.last_failure = reason;
  record.cooldown_until = now + CooldownAfter(record.failures);
  record.last_change = next_change_++;
  ForgetOldLostHosts();
}

void HostManager::Drain(const std::string& host) {
  Record& record = RecordOf(host);
  record.drained = true;
  record.last_change = next_change_++;
  ForgetOldLostHosts();
}

void HostManager::Undrain(const std::string& host) {
  auto it = hosts_.find(host);
  if (it != hosts_.end()) it->second.drained = false;
}

HostSet HostManager::UsableHosts(absl::Time now) const {
  HostSet usable;
  for (const auto& [host, record] : hosts_) {
    if (StateOf(record, now) == HostState::kUsable) usable.push_back({host, record.slots});
  }
  return usable;
}

std::vector<HostInfo> HostManager::Hosts(absl::Time now) const {
  std::vector<HostInfo> infos;
  infos.reserve(hosts_.size());
  for (const auto& [host, record] : hosts_) {
    HostInfo info;
    info.host = host;
    info.slots = record.slots;
    info.state = StateOf(record, now);
    info.cooldown_left = std::max(record.cooldown_until - now, absl::ZeroDuration());
    info.failures = record.failures;
    info.last_failure = record.last_failure;
    infos.push_back(std::move(info));
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
