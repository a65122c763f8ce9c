// What the collectives of one host's group (shm_collectives.cc and the
// hierarchical allreduce's halves, shm_own_parts.cc) share: labels, the
// split of a tensor among ranks, and the rule that a failure kills the
// group.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::internal::shm {

inline uint8_t* Bytes(void* data) { return static_cast<uint8_t*>(data); }

// Horovod's split (gloo_ring.h's EvenSplit): the first total % parts get one more.
inline int64_t SplitCount(int64_t total, int parts, int index) {
  return total / parts + (index < total % parts ? 1 : 0);
}
inline int64_t SplitOffset(int64_t total, int parts, int index) {
  return index * (total / parts) + std::min<int64_t>(index, total % parts);
}

// Kills the group on every local rank unless the failure is the caller's
// argument, which every rank rejects alike.
absl::Status Checked(ShmGroup& group, absl::Status status);
template <typename T>
absl::StatusOr<T> Checked(ShmGroup& group, absl::StatusOr<T> result) {
  if (!result.ok()) Checked(group, result.status()).IgnoreError();
  return result;
}

// The tensor and scale factors of an allreduce (INVALID_ARGUMENT).
absl::Status CheckAllreduceArgs(const std::string& label, const TensorView& tensor,
                                const AllreduceOptions& options);

}  // namespace horovodd::internal::shm
