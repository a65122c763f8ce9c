#include "discovery/host_diff.h"

#include <map>

namespace horovodd::discovery {

bool HostDiff::empty() const { return added.empty() && removed.empty() && resized.empty(); }

HostDiff DiffHosts(const HostSet& before, const HostSet& after) {
  // Maps rather than a merge walk, so a hand-built (unsorted) set still diffs correctly.
  std::map<std::string, int> old_slots;
  for (const HostSlots& h : before) old_slots[h.host] = h.slots;
  std::map<std::string, int> new_slots;
  for (const HostSlots& h : after) new_slots[h.host] = h.slots;

  HostDiff diff;
  for (const auto& [host, slots] : new_slots) {
    auto old = old_slots.find(host);
    if (old == old_slots.end()) {
      diff.added.push_back(host);
    } else if (old->second != slots) {
      diff.resized.push_back({host, slots});
    }
  }
  for (const auto& [host, slots] : old_slots) {
    if (new_slots.count(host) == 0) diff.removed.push_back(host);
  }
  return diff;
}

}  // namespace horovodd::discovery
