#include "worker_runtime/gloo/gloo_ring.h"

#include <algorithm>
#include <utility>

#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Gloo's choice too: big enough to amortize per-message cost, small enough
// to stay in cache while reducing.
constexpr int64_t kMaxSegmentBytes = int64_t{1} << 20;

// Chunks up to this size go whole, one message per ring step: cutting them
// in two only buys overlap of reductions that take microseconds, and doubles
// the messages, each a wake-up of the receiver -- what a small allreduce
// costs, most of all with more processes than cores.
constexpr int64_t kMaxUnsegmentedChunkBytes = int64_t{64} << 10;

int Mod(int64_t value, int n) { return static_cast<int>(((value % n) + n) % n); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What ring step `index` (step * segments_per_chunk + segment) sends to the
// right neighbour and receives from the left one.
struct StepRanges {
  ElementRange send;
  ElementRange recv;
};

// Runs `steps` ring steps with up to `depth` in flight: step i is posted,
// then step i - depth is completed by `complete` (which waits for it). Step i
// may only send what step i - segments_per_chunk received, so `depth` is at
// most the layout's segments per chunk (and at most two: the receive slots).
template <typename Post, typename Complete>
absl::Status Pipeline(int64_t steps, int depth, Post post, Complete complete) {
  for (int64_t i = 0; i < steps + depth; ++i) {
    if (i >= depth) HVDD_RETURN_IF_ERROR(complete(i - depth));
    if (i < steps) HVDD_RETURN_IF_ERROR(post(i));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> EvenSplit(int64_t total, int parts) {
  std::vector<int64_t> counts(parts, total / parts);
  for (int64_t i = 0; i < total % parts; ++i) ++counts[i];
  return counts;
}

RingLayout::RingLayout(DType dtype, std::vector<int64_t> chunk_counts)
    : dtype_(dtype), element_size_(DTypeSize(dtype)), chunk_counts_(std::move(chunk_counts)) {
  chunk_offsets_.resize(chunk_counts_.size());
  int64_t offset = 0;
  int64_t largest = 0;
  for (size_t i = 0; i < chunk_counts_.size(); ++i) {
    chunk_offsets_[i] = offset;
    offset += chunk_counts_[i];
    largest = std::max(largest, chunk_counts_[i]);
  }
  const int64_t max_segment_elements =
      std::max<int64_t>(1, kMaxSegmentBytes / static_cast<int64_t>(element_size_));
  const bool whole = largest * static_cast<int64_t>(element_size_) <= kMaxUnsegmentedChunkBytes;
  segments_per_chunk_ =
      whole ? 1 : static_cast<int>(std::max<int64_t>(2, CeilDiv(largest, max_segment_elements)));
  segment_capacity_ = CeilDiv(largest, segments_per_chunk_);
}

ElementRange RingLayout::segment(int chunk_index, int segment_index) const {
  const int64_t start = segment_index * segment_capacity_;
  const int64_t count =
      std::clamp<int64_t>(chunk_counts_[chunk_index] - start, 0, segment_capacity_);
  return {chunk_offsets_[chunk_index] + start, count};
}

absl::Status RingReduceScatter(CollectiveScope& scope, gloo::transport::UnboundBuffer& buffer,
                               const RingLayout& layout, ReduceOp op) {
  const int n = scope.size();
  const int rank = scope.rank();
  const int segments = layout.segments_per_chunk();
  const size_t element_size = layout.element_size();
  const size_t slot_bytes = static_cast<size_t>(layout.segment_capacity()) * element_size;
  if (n == 1 || slot_bytes == 0) return absl::OkStatus();

  // Two receive slots: one being filled while the other is reduced.
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch incoming, scope.RegisterScratch(2 * slot_bytes));
  auto* data = static_cast<uint8_t*>(buffer.ptr);

  // Step k sends chunk rank-k-1 (holding k+1 contributions) and receives
  // chunk rank-k-2 to add ours to; after n-1 steps chunk `rank` is complete.
  auto ranges = [&](int64_t index) {
    const int64_t k = index / segments;
    const int segment = static_cast<int>(index % segments);
    return StepRanges{layout.segment(Mod(rank - k - 1, n), segment),
                      layout.segment(Mod(rank - k - 2, n), segment)};
  };
  auto post = [&](int64_t index) -> absl::Status {
    const StepRanges step = ranges(index);
    if (step.recv.count > 0) {
      HVDD_RETURN_IF_ERROR(scope.Recv(*incoming.buffer, Mod(rank - 1, n), (index % 2) * slot_bytes,
                                      step.recv.count * element_size, Channel::kData));
    }
    if (step.send.count > 0) {
      HVDD_RETURN_IF_ERROR(scope.Send(buffer, Mod(rank + 1, n), step.send.offset * element_size,
                                      step.send.count * element_size, Channel::kData));
    }
    return absl::OkStatus();
  };
  auto complete = [&](int64_t index) -> absl::Status {
    const StepRanges step = ranges(index);
    if (step.recv.count > 0) {
      HVDD_RETURN_IF_ERROR(scope.WaitRecv(*incoming.buffer));
      ReduceInto(layout.dtype(), op, data + step.recv.offset * element_size,
                 incoming.data + (index % 2) * slot_bytes, step.recv.count);
    }
    if (step.send.count > 0) HVDD_RETURN_IF_ERROR(scope.WaitSend(buffer));
    return absl::OkStatus();
  };
  return Pipeline(int64_t{n - 1} * segments, std::min(segments, 2), post, complete);
}

absl::Status RingAllgather(CollectiveScope& scope, gloo::transport::UnboundBuffer& buffer,
                           const RingLayout& layout) {
  const int n = scope.size();
  const int rank = scope.rank();
  const int segments = layout.segments_per_chunk();
  const size_t element_size = layout.element_size();
  if (n == 1 || layout.segment_capacity() == 0) return absl::OkStatus();

  // Step k forwards chunk rank-k (ours, or received in step k-1) and
  // receives chunk rank-k-1 in place.
  auto ranges = [&](int64_t index) {
    const int64_t k = index / segments;
    const int segment = static_cast<int>(index % segments);
    return StepRanges{layout.segment(Mod(rank - k, n), segment),
                      layout.segment(Mod(rank - k - 1, n), segment)};
  };
  auto post = [&](int64_t index) -> absl::Status {
    const StepRanges step = ranges(index);
    if (step.recv.count > 0) {
      HVDD_RETURN_IF_ERROR(scope.Recv(buffer, Mod(rank - 1, n), step.recv.offset * element_size,
                                      step.recv.count * element_size, Channel::kData));
    }
    if (step.send.count > 0) {
      HVDD_RETURN_IF_ERROR(scope.Send(buffer, Mod(rank + 1, n), step.send.offset * element_size,
                                      step.send.count * element_size, Channel::kData));
    }
    return absl::OkStatus();
  };
  auto complete = [&](int64_t index) -> absl::Status {
    const StepRanges step = ranges(index);
    if (step.recv.count > 0) HVDD_RETURN_IF_ERROR(scope.WaitRecv(buffer));
    if (step.send.count > 0) HVDD_RETURN_IF_ERROR(scope.WaitSend(buffer));
    return absl::OkStatus();
  };
  return Pipeline(int64_t{n - 1} * segments, std::min(segments, 2), post, complete);
}

}  // namespace horovodd::internal
