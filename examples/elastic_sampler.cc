#include "elastic_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace horovodd::examples {

std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t samples) {
  std::seed_seq seeds{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                      static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32)};
  std::mt19937_64 rng(seeds);
  std::vector<int64_t> permutation(samples);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), rng);
  return permutation;
}

int64_t BatchLength(int64_t samples, int64_t offset, int64_t batch_size) {
  return std::max<int64_t>(0, std::min(batch_size, samples - offset));
}

std::vector<int64_t> RankShare(const std::vector<int64_t>& permutation, int64_t offset,
                               int64_t batch_size, int rank, int size) {
  const int64_t end =
      offset + BatchLength(static_cast<int64_t>(permutation.size()), offset, batch_size);
  std::vector<int64_t> share;
  for (int64_t position = offset + rank; position < end; position += size) {
    share.push_back(permutation[position]);
  }
  return share;
}

}  // namespace horovodd::examples
