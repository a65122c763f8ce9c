#include "worker_runtime/gloo/scratch_pool.h"

#include <utility>

namespace horovodd::internal {

ScratchPool::Block ScratchPool::Take(size_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (kept_[i].capacity >= bytes &&
          (best == kept_.size() || kept_[i].capacity < kept_[best].capacity)) {
        best = i;
      }
    }
    if (best != kept_.size()) {
      Block block = std::move(kept_[best]);
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
      return block;
    }
  }
  // Not value-initialized: zeroing would touch every page for nothing.
  return Block{std::unique_ptr<uint8_t[]>(new uint8_t[bytes == 0 ? 1 : bytes]), bytes};
}

void ScratchPool::Give(Block block) {
  if (block.data == nullptr || block.capacity > kMaxKeptBytes) return;
  absl::MutexLock lock(&mu_);
  if (kept_.size() >= kMaxKeptBlocks) {
    // Drop the smallest: bigger blocks serve more requests.
    size_t smallest = 0;
    for (size_t i = 1; i < kept_.size(); ++i) {
      if (kept_[i].capacity < kept_[smallest].capacity) smallest = i;
    }
    if (kept_[smallest].capacity >= block.capacity) return;
    kept_[smallest] = std::move(block);
    return;
  }
  kept_.push_back(std::move(block));
}

}  // namespace horovodd::internal
