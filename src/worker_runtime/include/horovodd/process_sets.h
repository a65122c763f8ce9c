// Process sets, Horovod's: named groups of ranks whose collectives run among
// themselves, beside the global set (id 0, every rank). Each set has its own
// ring and engine, built through the daemon's store like the global one.
//
// Adding and removing are collective over every rank of the job (all must
// call them alike, in the same order). At run time they need
// HOROVOD_DYNAMIC_PROCESS_SETS=1, as in Horovod; sets given at start
// (Horovod's init(process_sets=...)) are added with `at_init`. A reset of
// the job (a new generation) leaves only the global set.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace horovodd {

// Returns the new set's id (1, 2, ... in the order sets are added).
// INVALID_ARGUMENT for ranks that are empty, repeated or out of range, or
// the same as an existing set's; FAILED_PRECONDITION when dynamic sets are
// off and `at_init` is false.
absl::StatusOr<int> AddProcessSet(std::vector<int> ranks, bool at_init = false);
// NOT_FOUND for an unknown id; INVALID_ARGUMENT for 0.
absl::Status RemoveProcessSet(int process_set_id);
// The set's ranks, ascending. NOT_FOUND for an unknown id.
absl::StatusOr<std::vector<int>> ProcessSetRanks(int process_set_id);
// The process sets there are, the global one first.
std::vector<int> ProcessSetIds();

}  // namespace horovodd
