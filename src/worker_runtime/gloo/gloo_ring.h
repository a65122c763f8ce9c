// Ring reduce-scatter and ring allgather over one buffer split into one chunk
// per rank -- the two halves of a bandwidth-optimal allreduce. A chunk over
// 64 KiB is cut into segments (at least two, at most 1 MiB) and two segments
// are in flight while the previous one is reduced, as in Gloo's own ring; a
// smaller chunk goes whole, one message per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

#include "absl/status/status.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_transfer.h"

namespace horovodd::internal {

// `total` split into `parts` counts as evenly as possible; the first
// (total % parts) get one more (Horovod's rule).
std::vector<int64_t> EvenSplit(int64_t total, int parts);

// Elements [offset, offset + count) of the ring's buffer.
struct ElementRange {
  int64_t offset = 0;
  int64_t count = 0;
};

// Where each rank's chunk, and each segment of it, lies in the ring's buffer.
class RingLayout {
 public:
  // chunk_counts[r]: elements of chunk r; chunks are contiguous, in rank order.
  RingLayout(DType dtype, std::vector<int64_t> chunk_counts);

  DType dtype() const { return dtype_; }
  size_t element_size() const { return element_size_; }
  int chunks() const { return static_cast<int>(chunk_counts_.size()); }
  ElementRange chunk(int index) const { return {chunk_offsets_[index], chunk_counts_[index]}; }
  int segments_per_chunk() const { return segments_per_chunk_; }
  int64_t segment_capacity() const { return segment_capacity_; }
  // May be empty (count 0) at the end of a short chunk.
  ElementRange segment(int chunk_index, int segment_index) const;

 private:
  DType dtype_;
  size_t element_size_;
  std::vector<int64_t> chunk_counts_;
  std::vector<int64_t> chunk_offsets_;
  int segments_per_chunk_ = 1;
  int64_t segment_capacity_ = 0;  // elements in a full segment
};

// Afterwards chunk `rank` of `buffer` holds the reduction of that chunk over
// all ranks (kAverage: still the sum); other chunks hold partial results.
absl::Status RingReduceScatter(CollectiveScope& scope, gloo::transport::UnboundBuffer& buffer,
                               const RingLayout& layout, ReduceOp op);

// Every rank contributes chunk `rank` of `buffer`; afterwards every rank
// holds every chunk.
absl::Status RingAllgather(CollectiveScope& scope, gloo::transport::UnboundBuffer& buffer,
                           const RingLayout& layout);

}  // namespace horovodd::internal
