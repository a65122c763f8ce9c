// Where the local ranks of a group run, and which CPU a rank should move to
// when the kernel crowds them (shm_group.cc's waits).
//
// With more local ranks than CPUs, every rank does its share of each
// collective, so the CPU holding the most ranks sets the pace. The kernel
// left 3 of 4 ranks on one of two CPUs for tens of milliseconds and more
// (to its balancer ranks that run in short bursts all look cache-hot, and a
// busy CPU rebalances only every few tens of ms): 4 ranks at 1 MiB took
// 580-700 us an op in such stretches against 400-460. The group therefore
// keeps, per rank, the CPU it last waited on and, per CPU, how many ranks
// last waited there; a waiting rank on a CPU holding more than its share
// moves itself to the emptiest one.
#pragma once

#include "absl/types/span.h"

namespace horovodd::internal::shm {

// `mine`: the CPU this rank last waited on (-1: not known) and
// `ranks_on_mine` the local ranks that last waited there, this one included;
// `ranks`: the group's local ranks; `allowed`: the CPUs this rank may run on,
// in any order, and `ranks_on[i]` the ranks that last waited on allowed[i]
// (ranks not heard from yet count nowhere). Returns the CPU this rank should
// move to, or -1 to stay: it stays unless its CPU holds more than
// ceil(ranks / CPUs) ranks and some allowed CPU fewer; it moves to the
// allowed CPU with the fewest ranks (the lowest of a tie). O(CPUs): the
// group keeps the counts per CPU, so no wait reads every rank's CPU.
int EmptierCpu(int mine, int ranks_on_mine, int ranks, absl::Span<const int> allowed,
               absl::Span<const int> ranks_on);

}  // namespace horovodd::internal::shm
