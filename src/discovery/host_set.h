// The value types every part of discovery passes around: a host and its slot count, and a
// set of them.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace horovodd::discovery {

// Most worker slots one host may offer. Large enough for any real machine, small enough that a
// typo ("a:40000") or a runaway script cannot make the daemon plan an absurd job.
inline constexpr int kMaxSlotsPerHost = 4096;

struct HostSlots {
  std::string host;
  int slots = 0;

  bool operator==(const HostSlots& other) const;
  bool operator!=(const HostSlots& other) const { return !(*this == other); }
};

// One entry per host (the parsers guarantee it), in the order the hosts were listed: the
// order ranks are assigned in.
using HostSet = std::vector<HostSlots>;

int TotalSlots(const HostSet& hosts);

// "a:2,b:4" -- the form ParseHostList reads back; used in logs and job events.
std::string FormatHostSet(const HostSet& hosts);

// "a:2"; lets test frameworks and logs print hosts.
std::ostream& operator<<(std::ostream& os, const HostSlots& host);

}  // namespace horovodd::discovery
