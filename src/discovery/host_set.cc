#include "discovery/host_set.h"

#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace horovodd::discovery {

bool HostSlots::operator==(const HostSlots& other) const {
  return host == other.host && slots == other.slots;
}

int TotalSlots(const HostSet& hosts) {
  int total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  return total;
}

std::string FormatHostSet(const HostSet& hosts) {
  return absl::StrJoin(hosts, ",", [](std::string* out, const HostSlots& h) {
    absl::StrAppend(out, h.host, ":", h.slots);
  });
}

std::ostream& operator<<(std::ostream& os, const HostSlots& host) {
  return os << host.host << ":" << host.slots;
}

}  // namespace horovodd::discovery
