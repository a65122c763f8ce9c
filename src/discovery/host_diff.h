// What changed between two discovered host sets; the elastic driver turns a non-empty diff
// into a new generation.
#pragma once

#include <string>
#include <vector>

#include "discovery/host_set.h"

namespace horovodd::discovery {

struct HostDiff {
  std::vector<std::string> added;    // in `after` only, sorted
  std::vector<std::string> removed;  // in `before` only, sorted
  std::vector<HostSlots> resized;    // in both with different slots; holds the new count

  bool empty() const;
};

HostDiff DiffHosts(const HostSet& before, const HostSet& after);

}  // namespace horovodd::discovery
