#include "worker_runtime/nccl_shrink_plan.h"

namespace horovodd::internal {

std::optional<std::vector<int>> ShrinkExclusions(const std::vector<int64_t>& previous_ids,
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

}  // namespace horovodd::internal
