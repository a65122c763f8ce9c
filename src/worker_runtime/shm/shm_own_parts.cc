// The hierarchical allreduce's halves within one host (shm_own_parts.h).
#include "worker_runtime/shm/shm_own_parts.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/shm/shm_collective_support.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/copy_bytes.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal::shm {

PartRange OwnPart(int64_t count, int parts, int r) {
  return PartRange{SplitOffset(count, parts, r), SplitCount(count, parts, r)};
}

namespace {

// A tensor of `count` elements in n parts (OwnPart), each cut in chunks of
// `chunk` elements: chunk k of every part goes in round k.
class PartChunks {
 public:
  PartChunks(int64_t count, int n, int64_t chunk) : chunk_(chunk) {
    for (int p = 0; p < n; ++p) parts_.push_back(OwnPart(count, n, p));
    // Part 0 is the longest.
    rounds_ = (parts_[0].count + chunk - 1) / chunk;
  }
  int64_t rounds() const { return rounds_; }
  // Elements of part p's chunk k, and where it starts in the tensor.
  int64_t count(int p, int64_t k) const {
    return std::clamp<int64_t>(parts_[p].count - k * chunk_, 0, chunk_);
  }
  int64_t start(int p, int64_t k) const { return parts_[p].offset + k * chunk_; }

 private:
  const int64_t chunk_;
  std::vector<PartRange> parts_;
  int64_t rounds_ = 0;
};

}  // namespace

absl::Status ReduceOwnPart(ShmGroup& group, TensorView inout, const AllreduceOptions& options,
                           absl::Time deadline) {
  const std::string label = OpLabel("allreduce", options.name);
  HVDD_RETURN_IF_ERROR(group.health());
  HVDD_RETURN_IF_ERROR(CheckAllreduceArgs(label, inout, options));
  const int64_t count = inout.numel();
  if (count == 0) return absl::OkStatus();
  const size_t element = DTypeSize(inout.dtype);
  const int n = group.size();
  const int me = group.rank();
  // A round holds chunk k of every part, part p's at p * chunk in the slot.
  const int64_t chunk = static_cast<int64_t>(group.slot_bytes() / element) / n;
  if (chunk == 0) {
    return Checked(group, absl::FailedPreconditionError(absl::StrCat(
                              label, ": a ", group.slot_bytes(), "-byte slot cannot hold ", n,
                              " local ranks' chunks (HOROVODD_SHM_SLOT_BYTES)")));
  }
  const PartChunks chunks(count, n, chunk);
  uint8_t* data = Bytes(inout.data);
  // Our chunk of our own part is ours alone to read: it stays in the tensor.
  auto fill = [&](int64_t k, uint8_t* own) {
    for (int p = 0; p < n; ++p) {
      const int64_t m = chunks.count(p, k);
      if (m == 0 || p == me) continue;
      uint8_t* to = own + p * chunk * element;
      CopyBytes(to, data + chunks.start(p, k) * element, m * element);
      if (options.prescale_factor != 1.0) ScaleInPlace(inout.dtype, to, m, options.prescale_factor);
    }
  };
  auto reduce = [&]() -> absl::Status {
    fill(0, group.slot(me));
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    for (int64_t k = 0; k < chunks.rounds(); ++k) {
      // Our chunk, in place in our part of the tensor: ours first, then the
      // others' in rank order (the same order on every host).
      const int64_t m = chunks.count(me, k);
      if (m > 0) {
        uint8_t* into = data + chunks.start(me, k) * element;
        if (options.prescale_factor != 1.0) {
          ScaleInPlace(inout.dtype, into, m, options.prescale_factor);
        }
        const size_t at = static_cast<size_t>(me * chunk) * element;
        for (int p = 0; p < n; ++p) {
          if (p != me) ReduceInto(inout.dtype, options.op, into, group.slot(p) + at, m);
        }
      }
      if (k + 1 < chunks.rounds()) fill(k + 1, group.next_slot(me));
      HVDD_RETURN_IF_ERROR(group.Sync(deadline));
      group.NextRound();
    }
    return absl::OkStatus();
  };
  return Checked(group, reduce());
}

absl::Status ShareOwnParts(ShmGroup& group, TensorView inout, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  HVDD_RETURN_IF_ERROR(CheckTensor("allreduce", inout));
  const int64_t count = inout.numel();
  if (count == 0) return absl::OkStatus();
  const size_t element = DTypeSize(inout.dtype);
  const int n = group.size();
  const int me = group.rank();
  // A round holds chunk k of each rank's own part, in its slot.
  const PartChunks chunks(count, n, static_cast<int64_t>(group.slot_bytes() / element));
  uint8_t* data = Bytes(inout.data);
  auto at = [&](int p, int64_t k) { return data + chunks.start(p, k) * element; };
  auto share = [&]() -> absl::Status {
    CopyBytes(group.slot(me), at(me, 0), chunks.count(me, 0) * element);
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    for (int64_t k = 0; k < chunks.rounds(); ++k) {
      for (int p = 0; p < n; ++p) {
        if (p != me) CopyBytes(at(p, k), group.slot(p), chunks.count(p, k) * element);
      }
      if (k + 1 < chunks.rounds()) {
        CopyBytes(group.next_slot(me), at(me, k + 1), chunks.count(me, k + 1) * element);
      }
      HVDD_RETURN_IF_ERROR(group.Sync(deadline));
      group.NextRound();
    }
    return absl::OkStatus();
  };
  return Checked(group, share());
}

}  // namespace horovodd::internal::shm
