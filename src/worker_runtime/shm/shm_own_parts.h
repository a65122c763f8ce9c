// The two halves of an allreduce within one host, run apart by the
// hierarchical allreduce (hierarchical/): ReduceOwnPart leaves each
// local rank its own contiguous part reduced over the host, that part
// crosses hosts over TCP in one exchange, and ShareOwnParts copies every
// rank's part into every other's tensor. Same failure rule as
// shm_collectives.h: anything but INVALID_ARGUMENT kills the group.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "horovodd/tensor.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal::shm {

// Local rank r's part of a tensor of `count` elements in ReduceOwnPart and
// ShareOwnParts: contiguous, Horovod's split (the first count % parts are
// one element longer).
struct PartRange {
  int64_t offset = 0;
  int64_t count = 0;
};
PartRange OwnPart(int64_t count, int parts, int r);

// The first half of an allreduce, in place: this rank's own part of `inout`
// (OwnPart) ends up holding the reduction (prescaled, not finished: kAverage
// is still a sum) of every local rank's copy of it, folded in place: this
// rank's copy first, then the others' in local rank order; the rest of
// `inout` is left as it was. In rounds that each carry, in a rank's slot,
// one chunk of each of the other ranks' parts: a rank's own part never
// goes through the segment.
absl::Status ReduceOwnPart(ShmGroup& group, TensorView inout, const AllreduceOptions& options,
                           absl::Time deadline);

// The second half: every rank's own part of `inout` is copied into the same
// place of every other local rank's `inout`.
absl::Status ShareOwnParts(ShmGroup& group, TensorView inout, absl::Time deadline);

}  // namespace horovodd::internal::shm
