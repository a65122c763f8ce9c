#include "worker_runtime/shm/shm_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/shm/shm_collective_support.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/copy_bytes.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal::shm {
namespace {

static_assert(ArgumentHeader::kWords <= kMetaWords);

// LocalRounds' copy_in for one tensor.
auto CopyFrom(const TensorView& input) {
  return [data = Bytes(input.data), element = DTypeSize(input.dtype)](int64_t offset, int64_t count,
                                                                      uint8_t* into) {
    CopyBytes(into, data + offset * element, count * element);
  };
}

// Several tensors of one dtype read as one, laid end to end: the rounds
// copy straight from and into them (no staging buffer in between).
class Parts {
 public:
  explicit Parts(const std::vector<TensorView>& parts) : parts_(parts), starts_(1, 0) {
    for (const TensorView& t : parts_) starts_.push_back(starts_.back() + t.numel());
  }
  int64_t numel() const { return starts_.back(); }

  // Calls fn(part's bytes, elements, where they start in [offset, offset +
  // count)) for each piece of a part inside that range, in order.
  template <typename Fn>
  void ForEachPiece(int64_t offset, int64_t count, Fn fn) const {
    const size_t element = DTypeSize(parts_.front().dtype);
    // The last part starting at or before `offset`.
    size_t i = std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin() - 1;
    for (int64_t done = 0; done < count; ++i) {
      const int64_t from = offset + done - starts_[i];  // within part i
      const int64_t n = std::min(starts_[i + 1] - starts_[i] - from, count - done);
      if (n > 0) fn(Bytes(parts_[i].data) + from * element, n, done);
      done += std::max<int64_t>(n, 0);
    }
  }

 private:
  const std::vector<TensorView>& parts_;
  std::vector<int64_t> starts_;  // element offsets; starts_[i + 1] - starts_[i] = part i's
};

// The reduction rounds over `count` elements, for reducescatter: each rank
// copies the round's elements of its input into its slot, reduces its 1/n
// slice of the round across every slot (in rank order, into slot 0), and
// after the next wait takes what it wants of the reduced round.
// copy_in(offset, count, slot) puts elements [offset, offset + count) of
// this rank's input into its slot; copy_out(offset, count, reduced) takes
// each round's result (the same elements of the whole, at `reduced` in
// slot 0) before the round's set is reused. One wait per round: each
// round's wait ends both its reduction and the next round's copy-in, which
// goes into the next set (ShmGroup::next_slot) while this round is reduced.
template <typename CopyIn, typename CopyOut>
absl::Status LocalRounds(ShmGroup& group, DType dtype, int64_t count,
                         const AllreduceOptions& options, absl::Time deadline, CopyIn copy_in,
                         CopyOut copy_out) {
  if (count == 0) return absl::OkStatus();
  const size_t element = DTypeSize(dtype);
  const int n = group.size();
  const int me = group.rank();
  const int64_t per_round = static_cast<int64_t>(group.slot_bytes() / element);
  auto fill = [&](int64_t offset, uint8_t* own) {
    const int64_t m = std::min(per_round, count - offset);
    copy_in(offset, m, own);
    if (options.prescale_factor != 1.0) ScaleInPlace(dtype, own, m, options.prescale_factor);
  };
  fill(0, group.slot(me));
  HVDD_RETURN_IF_ERROR(group.Sync(deadline));
  for (int64_t offset = 0; offset < count; offset += per_round) {
    const int64_t m = std::min(per_round, count - offset);
    // Our slice of the round, folded in rank order into slot 0, finished.
    uint8_t* result = group.slot(0);
    const int64_t slice_count = SplitCount(m, n, me);
    uint8_t* slice = result + SplitOffset(m, n, me) * element;
    for (int p = 1; p < n && slice_count > 0; ++p) {
      ReduceInto(dtype, options.op, slice, group.slot(p) + (slice - result), slice_count);
    }
    FinishReduction(dtype, options.op, slice, slice_count, n, options.postscale_factor);
    if (offset + per_round < count) fill(offset + per_round, group.next_slot(me));
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    copy_out(offset, m, result);
    group.NextRound();
  }
  return absl::OkStatus();
}

// How many ranks fold a round of `bytes`: one per kMinSliceBytes, at most
// every rank. A slice much smaller than that costs each folder a cache line
// (and, first in a generation, a page fault) in every peer's slot for a few
// bytes, and every rank another one in every folder's slot to copy it out:
// at 256 local ranks a 4 KiB allreduce split 256 ways touched 65,000 pages
// across the host in a generation's first round, one split 4 ways 2,000.
constexpr int64_t kMinSliceBytes = 1024;
int Folders(int64_t bytes, int n) {
  return static_cast<int>(std::clamp<int64_t>((bytes + kMinSliceBytes - 1) / kMinSliceBytes, 1, n));
}

// The allreduce's rounds, in place: each folding rank (Folders: all of them
// but in a small round) finishes its own slice of every round in its own
// tensor and publishes only the result. In a round a rank copies the
// folders' slices of its data into its slot (its own slice never goes
// through the segment), folds the peers' copies of its slice into its
// tensor (its own value first, then the peers' in rank order) and writes
// the finished slice into its slot; after the next wait it copies every
// other folder's finished slice out of theirs. With every rank folding, per
// element that is (n - 1) / n of a copy in, 1 / n of a fold over n values,
// 1 / n of a copy of the result and (n - 1) / n of a copy out, where
// reducing into slot 0 would take a whole copy in and a whole copy out.
// Each slice is folded by one rank, so every rank ends with the same bits
// whatever the op. One wait per round: the round's wait ends both its folds
// and the next round's copy-in, which goes into the next set
// (ShmGroup::next_slot) while this round is folded.
//
// `pieces(offset, count, fn)` calls fn(bytes, elements, where they start in
// [offset, offset + count)) for each piece of this rank's data in that
// range. With `ready`, the first wait also carries each rank's vote, and
// unless no rank voted no the rounds stop there (*all_ready false,
// nothing written).
template <typename Pieces>
absl::Status SliceRounds(ShmGroup& group, DType dtype, int64_t count,
                         const AllreduceOptions& options, absl::Time deadline, const bool* ready,
                         bool* all_ready, Pieces pieces) {
  if (count == 0) return absl::OkStatus();
  const size_t element = DTypeSize(dtype);
  const int n = group.size();
  const int me = group.rank();
  const int64_t per_round = static_cast<int64_t>(group.slot_bytes() / element);
  // Where rank s's slice of the round at `offset` starts within the round
  // (and within every slot), and its elements.
  struct Slice {
    int64_t start;
    int64_t count;
  };
  auto slice_of = [&](int64_t offset, int s) {
    const int64_t m = std::min(per_round, count - offset);
    const int folders = Folders(m * static_cast<int64_t>(element), n);
    if (s >= folders) return Slice{m, 0};
    return Slice{SplitOffset(m, folders, s), SplitCount(m, folders, s)};
  };
  auto fill = [&](int64_t offset, uint8_t* own) {
    for (int s = 0; s < n; ++s) {
      if (s == me) continue;
      const Slice theirs = slice_of(offset, s);
      if (theirs.count == 0) break;  // the folders come first
      pieces(offset + theirs.start, theirs.count, [&](const uint8_t* piece, int64_t k, int64_t at) {
        uint8_t* into = own + (theirs.start + at) * element;
        CopyBytes(into, piece, k * element);
        if (options.prescale_factor != 1.0) ScaleInPlace(dtype, into, k, options.prescale_factor);
      });
    }
  };
  fill(0, group.slot(me));
  if (ready != nullptr && !*ready) group.VoteNo();
  HVDD_RETURN_IF_ERROR(group.Sync(deadline));
  if (ready != nullptr) {
    *all_ready = group.no_votes() == 0;
    if (!*all_ready) {
      group.NextRound();
      return absl::OkStatus();
    }
  }
  for (int64_t offset = 0; offset < count; offset += per_round) {
    const Slice mine = slice_of(offset, me);
    uint8_t* published = group.slot(me);
    // A rank that folds nothing this round only copies in and out.
    auto fold = [&](uint8_t* piece, int64_t k, int64_t at) {
      const size_t within = static_cast<size_t>(mine.start + at) * element;
      if (options.prescale_factor != 1.0) ScaleInPlace(dtype, piece, k, options.prescale_factor);
      for (int p = 0; p < n; ++p) {
        if (p != me) ReduceInto(dtype, options.op, piece, group.slot(p) + within, k);
      }
      FinishReduction(dtype, options.op, piece, k, n, options.postscale_factor);
      CopyBytes(published + within, piece, k * element);
    };
    if (mine.count > 0) pieces(offset + mine.start, mine.count, fold);
    if (offset + per_round < count) fill(offset + per_round, group.next_slot(me));
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    for (int s = 0; s < n; ++s) {
      if (s == me) continue;
      const Slice theirs = slice_of(offset, s);
      if (theirs.count == 0) break;
      const uint8_t* finished = group.slot(s);
      pieces(offset + theirs.start, theirs.count, [&](uint8_t* piece, int64_t k, int64_t at) {
        CopyBytes(piece, finished + (theirs.start + at) * element, k * element);
      });
    }
    group.NextRound();
  }
  return absl::OkStatus();
}

// SliceRounds' pieces for one tensor.
auto OnePiece(const TensorView& tensor) {
  return [data = Bytes(tensor.data), element = DTypeSize(tensor.dtype)](
             int64_t offset, int64_t count, auto fn) { fn(data + offset * element, count, 0); };
}

// The spare header word where a rank puts, in its header to itself, the
// largest `extra` it tells anyone (ExchangeHeaders' largest_extra).
constexpr size_t kLargestExtraWord = kMetaWords - 1;
static_assert(ArgumentHeader::kWords <= kLargestExtraWord);

// Every rank's header in one round (to_each[d] is what rank d reads from us);
// returns what each rank told this one. With `largest_extra`, also the
// largest `extra` any rank told any rank. A rank decodes n headers, not the
// n x n of every pair (65,000 at 256 local ranks, for each allgather).
absl::StatusOr<std::vector<ArgumentHeader>> ExchangeHeaders(
    ShmGroup& group, const std::vector<ArgumentHeader>& to_each, absl::Time deadline,
    int64_t* largest_extra = nullptr) {
  const int n = group.size();
  const int me = group.rank();
  int64_t* mine = group.meta(me);
  int64_t largest = 0;
  for (int d = 0; d < n; ++d) {
    to_each[d].Encode(mine + d * kMetaWords);
    largest = std::max(largest, to_each[d].extra);
  }
  mine[me * kMetaWords + kLargestExtraWord] = largest;
  HVDD_RETURN_IF_ERROR(group.Sync(deadline));
  std::vector<ArgumentHeader> from(n);
  for (int r = 0; r < n; ++r) from[r] = ArgumentHeader::Decode(group.meta(r) + me * kMetaWords);
  if (largest_extra != nullptr) {
    *largest_extra = 0;
    for (int r = 0; r < n; ++r) {
      *largest_extra = std::max(*largest_extra, group.meta(r)[r * kMetaWords + kLargestExtraWord]);
    }
  }
  group.NextRound();
  return from;
}

absl::StatusOr<Tensor> AllgatherBody(ShmGroup& group, const TensorView& input,
                                     absl::Time deadline) {
  const std::string label = "allgather";
  absl::Status own_error = CheckTensor(label, input);
  if (own_error.ok()) own_error = NeedsDimension(label, input);
  const int n = group.size();
  const int me = group.rank();
  HVDD_ASSIGN_OR_RETURN(
      auto headers,
      ExchangeHeaders(group,
                      std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok())),
                      deadline));
  HVDD_RETURN_IF_ERROR(CheckAgreement(label, headers, own_error, ShapeRule::kSameTrailingDims));
  const size_t row_bytes = static_cast<size_t>(input.row_numel()) * DTypeSize(input.dtype);
  std::vector<size_t> offset(n + 1, 0);
  int64_t total_rows = 0;
  size_t largest = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t rows = headers[r].shape[0];
    total_rows += rows;
    offset[r + 1] = offset[r] + rows * row_bytes;
    largest = std::max(largest, offset[r + 1] - offset[r]);
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  Tensor output(input.dtype, std::move(shape));
  if (offset[me + 1] > offset[me]) {
    CopyBytes(Bytes(output.data()) + offset[me], input.data, offset[me + 1] - offset[me]);
  }
  const size_t s = group.slot_bytes();
  for (size_t at = 0; at < largest; at += s) {
    const size_t own = offset[me + 1] - offset[me];
    if (at < own) CopyBytes(group.slot(me), Bytes(input.data) + at, std::min(s, own - at));
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    for (int r = 0; r < n; ++r) {
      const size_t bytes = offset[r + 1] - offset[r];
      if (r == me || at >= bytes) continue;
      CopyBytes(Bytes(output.data()) + offset[r] + at, group.slot(r), std::min(s, bytes - at));
    }
    group.NextRound();
  }
  return output;
}

absl::Status BroadcastBody(ShmGroup& group, TensorView inout, int root, absl::Time deadline) {
  const std::string label = "broadcast";
  HVDD_RETURN_IF_ERROR(CheckTensor(label, inout));
  const int n = group.size();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is out of range for ", n, " ranks"));
  }
  const size_t bytes = inout.nbytes();
  if (bytes == 0 || n == 1) return absl::OkStatus();
  // A set's slots are contiguous: the root fills all of them.
  const size_t per_round = n * group.slot_bytes();
  for (size_t at = 0; at < bytes; at += per_round) {
    const size_t m = std::min(per_round, bytes - at);
    if (group.rank() == root) CopyBytes(group.slot(0), Bytes(inout.data) + at, m);
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    if (group.rank() != root) CopyBytes(Bytes(inout.data) + at, group.slot(0), m);
    group.NextRound();
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> AlltoallBody(ShmGroup& group, const TensorView& input,
                                    const std::vector<int64_t>& splits,
                                    std::vector<int64_t>* received_splits, absl::Time deadline) {
  const std::string label = "alltoall";
  const int n = group.size();
  const int me = group.rank();
  const AlltoallPlan plan = PlanAlltoall(label, input, splits, n);
  const std::vector<int64_t>& send_rows = plan.send_rows;
  int64_t largest_rows = 0;  // the biggest block any rank sends any rank
  HVDD_ASSIGN_OR_RETURN(auto headers,
                        ExchangeHeaders(group, plan.to_each, deadline, &largest_rows));
  HVDD_RETURN_IF_ERROR(
      CheckAgreement(label, headers, plan.own_error, ShapeRule::kSameTrailingDims));
  const size_t row_bytes = static_cast<size_t>(input.row_numel()) * DTypeSize(input.dtype);
  // Where our rows for each destination start, and where each source's land.
  std::vector<size_t> send_at(n + 1, 0);
  std::vector<size_t> recv_at(n + 1, 0);
  std::vector<int64_t> recv_rows(n);
  const size_t largest = static_cast<size_t>(largest_rows) * row_bytes;
  for (int r = 0; r < n; ++r) {
    send_at[r + 1] = send_at[r] + send_rows[r] * row_bytes;
    recv_rows[r] = headers[r].extra;
    recv_at[r + 1] = recv_at[r] + recv_rows[r] * row_bytes;
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = 0;
  for (int r = 0; r < n; ++r) shape[0] += recv_rows[r];
  Tensor output(input.dtype, std::move(shape));
  if (recv_at[me + 1] > recv_at[me]) {
    CopyBytes(Bytes(output.data()) + recv_at[me], Bytes(input.data) + send_at[me],
              recv_at[me + 1] - recv_at[me]);
  }
  // Each round, a slot holds one part per destination.
  const size_t part = std::max<size_t>(group.slot_bytes() / n, 1);
  for (size_t at = 0; at < largest; at += part) {
    for (int d = 0; d < n; ++d) {
      const size_t bytes = send_at[d + 1] - send_at[d];
      if (d == me || at >= bytes) continue;
      CopyBytes(group.slot(me) + d * part, Bytes(input.data) + send_at[d] + at,
                std::min(part, bytes - at));
    }
    HVDD_RETURN_IF_ERROR(group.Sync(deadline));
    for (int r = 0; r < n; ++r) {
      const size_t bytes = recv_at[r + 1] - recv_at[r];
      if (r == me || at >= bytes) continue;
      CopyBytes(Bytes(output.data()) + recv_at[r] + at, group.slot(r) + me * part,
                std::min(part, bytes - at));
    }
    group.NextRound();
  }
  if (received_splits != nullptr) *received_splits = std::move(recv_rows);
  return output;
}

absl::StatusOr<Tensor> ReducescatterBody(ShmGroup& group, const TensorView& input,
                                         const ReducescatterOptions& scatter, absl::Time deadline) {
  const std::string label = "reducescatter";
  const absl::Status own_error =
      ReducescatterArgsError(label, input, scatter.prescale_factor, scatter.postscale_factor);
  const int n = group.size();
  const int me = group.rank();
  HVDD_ASSIGN_OR_RETURN(
      auto headers,
      ExchangeHeaders(group,
                      std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok())),
                      deadline));
  HVDD_RETURN_IF_ERROR(CheckAgreement(label, headers, own_error, ShapeRule::kSameShape));
  std::vector<int64_t> shape = input.shape;
  shape[0] = SplitCount(input.shape[0], n, me);
  Tensor output(input.dtype, std::move(shape));
  if (input.nbytes() == 0) return output;
  const int64_t begin = SplitOffset(input.shape[0], n, me) * input.row_numel();
  const int64_t end = begin + output.numel();
  const size_t element = DTypeSize(input.dtype);
  AllreduceOptions options;
  options.op = scatter.op;
  options.prescale_factor = scatter.prescale_factor;
  options.postscale_factor = scatter.postscale_factor;
  HVDD_RETURN_IF_ERROR(
      LocalRounds(group, input.dtype, input.numel(), options, deadline, CopyFrom(input),
                  [&](int64_t offset, int64_t count, const uint8_t* reduced) {
                    const int64_t from = std::max(offset, begin);
                    const int64_t to = std::min(offset + count, end);
                    if (from < to) {
                      CopyBytes(Bytes(output.data()) + (from - begin) * element,
                                reduced + (from - offset) * element, (to - from) * element);
                    }
                  }));
  return output;
}

}  // namespace

absl::Status Allreduce(ShmGroup& group, TensorView inout, const AllreduceOptions& options,
                       absl::Time deadline) {
  const std::string label = OpLabel("allreduce", options.name);
  HVDD_RETURN_IF_ERROR(group.health());
  HVDD_RETURN_IF_ERROR(CheckAllreduceArgs(label, inout, options));
  return Checked(group, SliceRounds(group, inout.dtype, inout.numel(), options, deadline, nullptr,
                                    nullptr, OnePiece(inout)));
}

absl::Status AllreduceParts(ShmGroup& group, const std::vector<TensorView>& parts,
                            const AllreduceOptions& options, absl::Time deadline) {
  const std::string label = OpLabel("allreduce", options.name);
  HVDD_RETURN_IF_ERROR(group.health());
  if (parts.empty()) return absl::OkStatus();
  for (const TensorView& part : parts) {
    HVDD_RETURN_IF_ERROR(CheckAllreduceArgs(label, part, options));
    if (part.dtype != parts.front().dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": fused tensors must share one dtype, got ",
                       DTypeName(parts.front().dtype), " and ", DTypeName(part.dtype)));
    }
  }
  const Parts whole(parts);
  return Checked(group, SliceRounds(group, parts.front().dtype, whole.numel(), options, deadline,
                                    nullptr, nullptr, [&](int64_t offset, int64_t count, auto fn) {
                                      whole.ForEachPiece(offset, count, fn);
                                    }));
}

absl::StatusOr<bool> AllreduceIfAllReady(ShmGroup& group, TensorView tensor, bool ready,
                                         const AllreduceOptions& options, absl::Time deadline) {
  const std::string label = OpLabel("allreduce", options.name);
  HVDD_RETURN_IF_ERROR(group.health());
  HVDD_RETURN_IF_ERROR(CheckAllreduceArgs(label, tensor, options));
  if (options.prescale_factor != 1.0) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": only an allreduce without a prescale confirms itself"));
  }
  if (tensor.numel() == 0) return false;
  bool all_ready = false;
  HVDD_RETURN_IF_ERROR(Checked(group, SliceRounds(group, tensor.dtype, tensor.numel(), options,
                                                  deadline, &ready, &all_ready, OnePiece(tensor))));
  return all_ready;
}

absl::StatusOr<Tensor> Allgather(ShmGroup& group, const TensorView& input, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  return Checked(group, AllgatherBody(group, input, deadline));
}

absl::Status Broadcast(ShmGroup& group, TensorView inout, int root, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  return Checked(group, BroadcastBody(group, inout, root, deadline));
}

absl::StatusOr<Tensor> Alltoall(ShmGroup& group, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  return Checked(group, AlltoallBody(group, input, splits, received_splits, deadline));
}

absl::StatusOr<Tensor> Reducescatter(ShmGroup& group, const TensorView& input,
                                     const ReducescatterOptions& options, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  return Checked(group, ReducescatterBody(group, input, options, deadline));
}

absl::Status Barrier(ShmGroup& group, absl::Time deadline) {
  HVDD_RETURN_IF_ERROR(group.health());
  if (group.size() == 1) return absl::OkStatus();
  absl::Status status = group.Sync(deadline);
  group.NextRound();
  return Checked(group, status);
}

}  // namespace horovodd::internal::shm
