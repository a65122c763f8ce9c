// Which samples each rank trains on, derived only from state the whole group
// agrees on (seed, epoch, offset into the epoch, rank, size). Because the
// offset is part of the committed state, a membership change mid-epoch neither
// skips nor repeats samples: the new group continues from the same offset and
// simply splits the remaining batches differently.
#pragma once

#include <cstdint>
#include <vector>

namespace horovodd::examples {

// A permutation of [0, samples), the same on every rank for (seed, epoch).
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t samples);

// How many samples the global batch starting at `offset` holds: batch_size,
// or fewer for the last batch of the epoch.
int64_t BatchLength(int64_t samples, int64_t offset, int64_t batch_size);

// This rank's share of that batch: positions offset+rank, offset+rank+size,
// ... of the permutation, so the ranks' shares partition the batch.
std::vector<int64_t> RankShare(const std::vector<int64_t>& permutation, int64_t offset,
                               int64_t batch_size, int rank, int size);

}  // namespace horovodd::examples
