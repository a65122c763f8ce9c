// Scratch memory of a context's collectives (receive slots, work copies,
// exchange buffers), kept between collectives. Allocating it afresh each
// time costs more than the copying it serves: glibc hands large blocks back
// to the kernel on free, so every collective faulted its pages in again.
// Contents are unspecified: users write or receive before they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::internal {

class ScratchPool {
 public:
  // Blocks past this are never kept (a rare huge reducescatter should not
  // pin its memory for the context's life).
  static constexpr size_t kMaxKeptBytes = size_t{16} << 20;
  // Enough for the buffers of the collectives that run at once (a
  // negotiation in flight beside a ring allreduce).
  static constexpr size_t kMaxKeptBlocks = 6;

  struct Block {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
  };

  // A block of at least `bytes` (the smallest kept one that fits, or new).
  Block Take(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `block` for later unless it is too big or enough are kept.
  void Give(Block block) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::vector<Block> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::internal
