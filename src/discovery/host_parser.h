// Parsers for the three ways hosts are written down: a discovery script's output, the
// `--hosts` flag, and a Horovod hostfile. All of them apply the same rules to each host:
//  - host names use letters, digits, '.', '-', '_' (no leading '-', so a name can never be
//    taken for an option by ssh), at most 253 characters;
//  - slots, when given, are an integer in [1, kMaxSlotsPerHost]; otherwise default_slots;
//  - the same host twice with the same slots collapses; with different slots it is an error.
// Any bad entry rejects the whole input with INVALID_ARGUMENT naming the line (or entry)
// number and its text, so a caller keeps its last good host set instead of a partial one.
// The result keeps the order the hosts are listed in (the first listing of each).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "discovery/host_set.h"

namespace horovodd::discovery {

// `host[:slots]` lines as printed by a discovery script. '#' starts a comment; blank lines
// and surrounding whitespace are ignored. No lines at all is a valid, empty host set (every
// host is gone).
absl::StatusOr<HostSet> ParseHostLines(std::string_view text, int default_slots);

// "a:2,b:2" (Horovod's --hosts): comma-separated `host[:slots]`. An empty list or an empty
// entry ("a,,b") is an error.
absl::StatusOr<HostSet> ParseHostList(std::string_view list, int default_slots);

// Horovod hostfile: one host per line, as "host slots=N", "host:N" or "host"; '#' comments
// and blank lines allowed. A hostfile with no hosts is an error.
absl::StatusOr<HostSet> ParseHostfile(std::string_view contents, int default_slots);

}  // namespace horovodd::discovery
