#include "worker_runtime/shm/cpu_spread.h"

#include <algorithm>

namespace horovodd::internal::shm {

int EmptierCpu(absl::Span<const int> rank_cpus, int me, absl::Span<const int> allowed) {
  if (allowed.size() < 2 || me < 0 || me >= static_cast<int>(rank_cpus.size())) return -1;
  const int mine = rank_cpus[me];
  if (mine < 0) return -1;
  const int ranks = static_cast<int>(rank_cpus.size());
  const int cpus = static_cast<int>(allowed.size());
  const int share = (ranks + cpus - 1) / cpus;
  auto ranks_on = [&](int cpu) {
    return static_cast<int>(std::count(rank_cpus.begin(), rank_cpus.end(), cpu));
  };
  if (ranks_on(mine) <= share) return -1;
  // The fewest ranks, then the lowest CPU; only a CPU below its share is
  // worth the move.
  int best = -1;
  int fewest = share;
  for (int cpu : allowed) {
    if (cpu == mine) continue;
    const int n = ranks_on(cpu);
    if (n < fewest || (n == fewest && best >= 0 && cpu < best)) {
      fewest = n;
      best = cpu;
    }
  }
  return best;
}

}  // namespace horovodd::internal::shm
