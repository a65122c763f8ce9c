#include "worker_runtime/shm/cpu_spread.h"

#include "common/check.h"

namespace horovodd::internal::shm {

int EmptierCpu(int mine, int ranks_on_mine, int ranks, absl::Span<const int> allowed,
               absl::Span<const int> ranks_on) {
  HVDD_CHECK_EQ(allowed.size(), ranks_on.size());
  if (allowed.size() < 2 || mine < 0 || ranks < 1) return -1;
  const int cpus = static_cast<int>(allowed.size());
  const int share = (ranks + cpus - 1) / cpus;
  if (ranks_on_mine <= share) return -1;
  // The fewest ranks, then the lowest CPU; only a CPU below its share is
  // worth the move.
  int best = -1;
  int fewest = share;
  for (int i = 0; i < cpus; ++i) {
    const int cpu = allowed[i];
    if (cpu == mine) continue;
    const int n = ranks_on[i];
    if (n < fewest || (n == fewest && best >= 0 && cpu < best)) {
      fewest = n;
      best = cpu;
    }
  }
  return best;
}

}  // namespace horovodd::internal::shm
