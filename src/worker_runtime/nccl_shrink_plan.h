// When a new generation's NCCL communicator can be shrunk from the previous
// one (ncclCommShrink) instead of built anew: the new generation must be the
// previous one minus some workers, everyone else in the same order. Pure
// functions, so the decision is tested without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace horovodd::internal {

// The ranks of the previous generation that the next one leaves out, when
// `next_ids` (worker ids by rank) is `previous_ids` with those ranks removed
// and nothing added or reordered; nullopt otherwise (a new worker, a changed
// order, an empty or unknown membership: the communicator is built anew).
// Identical inputs give an empty list (same members, same order).
std::optional<std::vector<int>> ShrinkExclusions(const std::vector<int64_t>& previous_ids,
                                                 const std::vector<int64_t>& next_ids);

}  // namespace horovodd::internal
