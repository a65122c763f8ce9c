// Allreduce (gloo_ops.h), plain or confirming itself, by one of three
// algorithms picked from the size and the ring's hosts, the same on every
// rank:
//   direct    small tensors: every rank sends its tensor to every peer and
//             reduces all of them itself, one round;
//   pairwise  2 to 16 ranks, up to a tensor's worth of pooled scratch: each
//             rank owns a chunk, gets every peer's part of it, reduces and
//             sends the result to everyone, two rounds;
//   ring      everything else, and whatever pairwise would take across
//             hosts with several ranks each: Gloo's ring, 2 (ranks - 1)
//             rounds.
// Each reduces every element in one fixed order (the direct one on every
// rank, the others on the rank owning it, which shares the result), so every
// rank ends with the same bits.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_op_support.h"
#include "worker_runtime/gloo/gloo_ops.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Up to this many bytes sent per rank ((ranks - 1) x the tensor), an
// allreduce sends its whole tensor to every peer and each rank reduces all
// of them itself: one message hop instead of the ring's 2 (ranks - 1), each
// of which waits for a process to be scheduled. Past it the ring's
// bandwidth wins; and past kPairwiseAllreduceMaxRanks ranks the ring too,
// however small the tensor: sending to every peer would connect every pair
// of the job (GlooContext connects a pair when it is first used), where the
// ring needs two per rank.
constexpr size_t kDirectAllreduceMaxBytesSent = size_t{256} << 10;

// While the scratch it needs (a tensor's worth) stays in the context's pool,
// an allreduce is a reduce-scatter and an allgather that each exchange with
// every peer at once: the ring's bytes in 2 rounds instead of 2 (ranks - 1),
// each of which waits for a process to be scheduled. At 2 ranks the ring is
// two rounds too, but cuts each chunk in 1 MiB segments (two messages per
// round from 1 MiB on) to overlap reducing with receiving, and the messages
// cost more than the overlap saves. Past the pool's bound the ring's two
// segment slots win, and past 16 ranks the parts get small and the peers
// many.
constexpr int kPairwiseAllreduceMaxRanks = kAllPeersMaxRanks;

enum class Algorithm { kDirect, kPairwise, kRing };

// `spans_hosts_with_peers`: GlooContext's. Across hosts with several ranks
// each, pairwise sends each rank's share to every rank of every other host:
// 2 x 2 ranks at 16 MiB put 32 MiB each way on the link between the hosts
// against the ring's 24 (two ranks on the ring's path cross, 1.5 x the
// tensor each), and L ranks per host put L tensors there against the ring's
// two at most. Between hosts bytes cost more than wake-ups, so the ring.
Algorithm Choose(const TensorView& tensor, int ranks, bool spans_hosts_with_peers) {
  if (ranks > 1 && ranks <= kPairwiseAllreduceMaxRanks &&
      tensor.nbytes() * static_cast<size_t>(ranks - 1) <= kDirectAllreduceMaxBytesSent) {
    return Algorithm::kDirect;
  }
  if (ranks >= 2 && ranks <= kPairwiseAllreduceMaxRanks && !spans_hosts_with_peers) {
    const size_t largest_chunk = static_cast<size_t>((tensor.numel() + ranks - 1) / ranks);
    if (static_cast<size_t>(ranks) * largest_chunk * DTypeSize(tensor.dtype) <=
        ScratchPool::kMaxKeptBytes) {
      return Algorithm::kPairwise;
    }
  }
  return Algorithm::kRing;
}

// Every rank reduces the same contributions in rank order. `input` (prescaled
// on the way, never in place) is read; `result` ends holding the allreduce.
absl::Status DirectAllreduce(CollectiveScope& scope, const void* input, TensorView result,
                             const AllreduceOptions& options) {
  const int n = scope.size();
  const size_t bytes = result.nbytes();
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch all, scope.RegisterScratch(n * bytes));
  uint8_t* own = all.data + scope.rank() * bytes;
  std::memcpy(own, input, bytes);
  if (options.prescale_factor != 1.0) {
    ScaleInPlace(result.dtype, own, result.numel(), options.prescale_factor);
  }
  std::vector<PeerRegion> from(n);
  for (int p = 0; p < n; ++p) from[p] = PeerRegion{p * bytes, bytes};
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(all.buffer,
                                             std::vector<PeerRegion>(n, from[scope.rank()]),
                                             all.buffer, from, Channel::kData));
  std::memcpy(result.data, all.data, bytes);
  for (int p = 1; p < n; ++p) {
    ReduceInto(result.dtype, options.op, result.data, all.data + p * bytes, result.numel());
  }
  FinishReduction(result.dtype, options.op, result.data, result.numel(), n,
                  options.postscale_factor);
  return absl::OkStatus();
}

// Rank r's chunk of a pairwise allreduce (EvenSplit), in bytes.
std::vector<PeerRegion> Chunks(const TensorView& tensor, int n) {
  const size_t element_size = DTypeSize(tensor.dtype);
  std::vector<PeerRegion> chunks(n);
  size_t offset = 0;
  const std::vector<int64_t> counts = EvenSplit(tensor.numel(), n);
  for (int p = 0; p < n; ++p) {
    chunks[p] = PeerRegion{offset, static_cast<size_t>(counts[p]) * element_size};
    offset += chunks[p].bytes;
  }
  return chunks;
}

// Whether a op b == b op a, bit for bit (NaN payloads aside). Not min and
// max: with a NaN they keep whichever operand comes first.
bool Commutes(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kProduct;
}

// The reduce-scatter half of a pairwise allreduce, posted: every rank sends
// each owner its part of the owner's chunk of `input` (already prescaled) and
// receives the parts of its own chunk into scratch.
struct PostedReduceScatter {
  std::vector<PeerRegion> chunks;  // Chunks(input, n)
  gloo::transport::UnboundBuffer* input = nullptr;
  uint8_t* parts = nullptr;                            // slot p (own_bytes each) gets rank p's part
  std::vector<gloo::transport::UnboundBuffer*> slots;  // each waited for alone
  int sends = 0;
};

absl::StatusOr<PostedReduceScatter> PostReduceScatter(CollectiveScope& scope,
                                                      const TensorView& input) {
  const int n = scope.size();
  const int rank = scope.rank();
  PostedReduceScatter posted;
  posted.chunks = Chunks(input, n);
  const size_t own_bytes = posted.chunks[rank].bytes;
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer,
                        scope.Register(input.data, input.nbytes()));
  posted.input = buffer;
  // Our own slot stays free for our own part, when FinishReduceScatter's
  // fold would overwrite it first.
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch parts, scope.RegisterScratch(n * own_bytes));
  posted.parts = parts.data;
  posted.slots.assign(n, nullptr);
  std::vector<int> peers;
  for (int p = 0; p < n; ++p) {
    if (p != rank && (own_bytes > 0 || posted.chunks[p].bytes > 0)) peers.push_back(p);
  }
  HVDD_RETURN_IF_ERROR(scope.Connect(peers));
  for (int p = 0; p < n && own_bytes > 0; ++p) {
    if (p == rank) continue;
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* slot,
                          scope.Register(posted.parts + p * own_bytes, own_bytes));
    posted.slots[p] = slot;
    HVDD_RETURN_IF_ERROR(scope.Recv(*slot, p, 0, own_bytes, Channel::kData));
  }
  for (int p = 0; p < n; ++p) {
    if (p == rank || posted.chunks[p].bytes == 0) continue;
    HVDD_RETURN_IF_ERROR(scope.Send(*posted.input, p, posted.chunks[p].offset,
                                    posted.chunks[p].bytes, Channel::kData));
    ++posted.sends;
  }
  return posted;
}

// Waits for the posted reduce-scatter. With `result` (the own chunk's size;
// it may be that chunk of `input`, which is otherwise only read) it reduces
// the parts of the own chunk there, in rank order; without, it only drains
// the transfers and writes nothing. Returns once `input` is no longer read.
absl::Status FinishReduceScatter(CollectiveScope& scope, const PostedReduceScatter& posted,
                                 const TensorView& input, uint8_t* result,
                                 const AllreduceOptions& options) {
  const int n = scope.size();
  const int rank = scope.rank();
  const size_t own_bytes = posted.chunks[rank].bytes;
  const int64_t own_count = static_cast<int64_t>(own_bytes / DTypeSize(input.dtype));
  if (own_bytes > 0 && result == nullptr) {
    for (int p = 0; p < n; ++p) {
      if (p != rank) HVDD_RETURN_IF_ERROR(scope.WaitRecv(*posted.slots[p]));
    }
  } else if (own_bytes > 0 && rank != 0 && Commutes(options.op) &&
             result == Bytes(input.data) + posted.chunks[rank].offset) {
    // Our own part is in place: fold the parts before ours (in rank order,
    // in slot 0) into it, then the ones after. a op b == b op a, so this
    // is the rank-order fold bit for bit, without first copying our part
    // out of the way and the first part into place (two copies of the
    // chunk: at 2 ranks and 4 MiB, half the tensor twice, on every call).
    uint8_t* before = posted.parts;  // slot 0: rank 0's part, then the fold
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(*posted.slots[0]));
    for (int p = 1; p < rank; ++p) {
      HVDD_RETURN_IF_ERROR(scope.WaitRecv(*posted.slots[p]));
      ReduceInto(input.dtype, options.op, before, posted.parts + p * own_bytes, own_count);
    }
    ReduceInto(input.dtype, options.op, result, before, own_count);
    for (int p = rank + 1; p < n; ++p) {
      HVDD_RETURN_IF_ERROR(scope.WaitRecv(*posted.slots[p]));
      ReduceInto(input.dtype, options.op, result, posted.parts + p * own_bytes, own_count);
    }
    FinishReduction(input.dtype, options.op, result, own_count, n, options.postscale_factor);
  } else if (own_bytes > 0) {
    const uint8_t* own_part = Bytes(input.data) + posted.chunks[rank].offset;
    if (own_part == result && rank != 0) {
      std::memcpy(posted.parts + rank * own_bytes, own_part, own_bytes);
      own_part = posted.parts + rank * own_bytes;
    }
    for (int p = 0; p < n; ++p) {
      const uint8_t* part = own_part;
      if (p != rank) {
        HVDD_RETURN_IF_ERROR(scope.WaitRecv(*posted.slots[p]));
        part = posted.parts + p * own_bytes;
      }
      if (p == 0) {
        if (part != result) std::memcpy(result, part, own_bytes);
      } else {
        ReduceInto(input.dtype, options.op, result, part, own_count);
      }
    }
    FinishReduction(input.dtype, options.op, result, own_count, n, options.postscale_factor);
  }
  for (int i = 0; i < posted.sends; ++i) HVDD_RETURN_IF_ERROR(scope.WaitSend(*posted.input));
  return absl::OkStatus();
}

// The whole reduce-scatter half: reduces the own chunk into `result`.
absl::Status PairwiseReduceScatter(CollectiveScope& scope, const TensorView& input, uint8_t* result,
                                   const AllreduceOptions& options) {
  HVDD_ASSIGN_OR_RETURN(PostedReduceScatter posted, PostReduceScatter(scope, input));
  return FinishReduceScatter(scope, posted, input, result, options);
}

// The allgather half's receives: every peer's chunk of the result into
// `output`. Posted before the reduce-scatter when `output` is the tensor it
// reads (Allreduce, in place): a peer sends its chunk's result only once it
// holds every rank's part of that chunk, so by then the reduce-scatter has
// sent ours and reads nothing there any more. Posted that early, the peer's
// send finds our receive waiting and goes out at once; posted after the
// reduction, the send waits for our "ready to receive" notice to cross the
// pair (Gloo's rendezvous per transfer), a message hop on every allreduce.
absl::StatusOr<CollectiveScope::PostedExchange> PostAllgatherReceives(CollectiveScope& scope,
                                                                      TensorView output) {
  const int n = scope.size();
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer,
                        scope.Register(output.data, output.nbytes()));
  return scope.PostExchange(nullptr, std::vector<PeerRegion>(n), buffer, Chunks(output, n),
                            Channel::kResult);
}

// The allgather half's sends: our chunk's result (`own_result`, which may
// already be in place) to every rank; then waits for `receives` too.
absl::Status FinishAllgather(CollectiveScope& scope,
                             const CollectiveScope::PostedExchange& receives,
                             const uint8_t* own_result, TensorView output) {
  const int n = scope.size();
  const PeerRegion own = Chunks(output, n)[scope.rank()];
  uint8_t* own_place = Bytes(output.data) + own.offset;
  if (own_place != own_result && own.bytes > 0) std::memcpy(own_place, own_result, own.bytes);
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::PostedExchange sends,
                        scope.PostExchange(receives.recv, std::vector<PeerRegion>(n, own), nullptr,
                                           std::vector<PeerRegion>(n), Channel::kResult));
  HVDD_RETURN_IF_ERROR(scope.WaitExchange(receives));
  return scope.WaitExchange(sends);
}

// Gloo's ring, in place.
absl::Status RingAllreduce(CollectiveScope& scope, TensorView inout,
                           const AllreduceOptions& options) {
  const int64_t count = inout.numel();
  if (options.prescale_factor != 1.0) {
    ScaleInPlace(inout.dtype, inout.data, count, options.prescale_factor);
  }
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer,
                        scope.Register(inout.data, inout.nbytes()));
  const RingLayout layout(inout.dtype, EvenSplit(count, scope.size()));
  HVDD_RETURN_IF_ERROR(RingReduceScatter(scope, *buffer, layout, options.op));
  // Finish our chunk before sharing it, so every rank ends with the owner's
  // bits and the division runs once per element, not once per rank.
  const ElementRange mine = layout.chunk(scope.rank());
  FinishReduction(inout.dtype, options.op, Bytes(inout.data) + mine.offset * layout.element_size(),
                  mine.count, scope.size(), options.postscale_factor);
  return RingAllgather(scope, *buffer, layout);
}

// What every allreduce entry point checks before its transfers.
absl::Status CheckAllreduce(const CollectiveScope& scope, const std::string& label,
                            const TensorView& tensor, const AllreduceOptions& options) {
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  HVDD_RETURN_IF_ERROR(CheckTensor(label, tensor));
  HVDD_RETURN_IF_ERROR(CheckReducible(label, tensor.dtype));
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "prescale_factor", options.prescale_factor));
  return CheckScaleFactor(label, "postscale_factor", options.postscale_factor);
}

// Every entry point's prologue: its scope, the checks, nothing to do for an
// empty tensor; then body(scope, algorithm, label) does the rest.
template <typename Body>
absl::Status RunAllreduce(GlooContext& context, const AllreduceOptions& options,
                          const TensorView& tensor, Body body) {
  const std::string label = OpLabel("allreduce", options.name);
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(CheckAllreduce(scope, label, tensor, options));
  if (tensor.numel() == 0) return absl::OkStatus();
  return body(scope, Choose(tensor, scope.size(), context.spans_hosts_with_peers()), label);
}

}  // namespace

absl::Status Allreduce(GlooContext& context, TensorView inout, const AllreduceOptions& options) {
  return RunAllreduce(
      context, options, inout,
      [&](CollectiveScope& scope, Algorithm algorithm, const std::string&) -> absl::Status {
        switch (algorithm) {
          case Algorithm::kDirect:
            return DirectAllreduce(scope, inout.data, inout, options);
          case Algorithm::kPairwise: {
            if (options.prescale_factor != 1.0) {
              ScaleInPlace(inout.dtype, inout.data, inout.numel(), options.prescale_factor);
            }
            HVDD_ASSIGN_OR_RETURN(CollectiveScope::PostedExchange results,
                              PostAllgatherReceives(scope, inout));
            uint8_t* own = Bytes(inout.data) + Chunks(inout, scope.size())[scope.rank()].offset;
            HVDD_RETURN_IF_ERROR(PairwiseReduceScatter(scope, inout, own, options));
            return FinishAllgather(scope, results, own, inout);
          }
          case Algorithm::kRing:
            return RingAllreduce(scope, inout, options);
        }
        return absl::InternalError("unknown allreduce algorithm");
      });
}

bool AllreduceConfirmsItself(const GlooContext& context, const TensorView& tensor,
                             const AllreduceOptions& options) {
  return options.prescale_factor == 1.0 &&
         Choose(tensor, context.size, context.spans_hosts_with_peers()) == Algorithm::kPairwise;
}

absl::StatusOr<bool> AllreduceIfAllReady(GlooContext& context, TensorView tensor, bool ready,
                                         const AllreduceOptions& options) {
  bool all_ready = false;
  absl::Status status = RunAllreduce(
      context, options, tensor,
      [&](CollectiveScope& scope, Algorithm algorithm, const std::string& label) -> absl::Status {
        if (algorithm != Algorithm::kPairwise || options.prescale_factor != 1.0) {
          return absl::FailedPreconditionError(absl::StrCat(
              label, ": only the pairwise allreduce without a prescale confirms itself"));
        }
        const int n = scope.size();
        const int rank = scope.rank();
        // Every rank's word, to every peer, ahead of its parts: the parts are
        // in flight while the words cross, and no rank writes anything (the
        // reduction, the allgather) before it has heard every word.
        HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch words, scope.RegisterScratch(n));
        words.data[rank] = ready ? 1 : 0;
        std::vector<PeerRegion> each_word(n);
        for (int p = 0; p < n; ++p) each_word[p] = PeerRegion{static_cast<size_t>(p), 1};
        HVDD_ASSIGN_OR_RETURN(
        CollectiveScope::PostedExchange word_exchange,
        scope.PostExchange(words.buffer, std::vector<PeerRegion>(n, each_word[rank]), words.buffer,
                           each_word, Channel::kMetadata));
        HVDD_ASSIGN_OR_RETURN(PostedReduceScatter parts, PostReduceScatter(scope, tensor));
        HVDD_RETURN_IF_ERROR(scope.WaitExchange(word_exchange));
        all_ready = std::all_of(words.data, words.data + n, [](uint8_t w) { return w == 1; });
        if (!all_ready) return FinishReduceScatter(scope, parts, tensor, nullptr, options);
        HVDD_ASSIGN_OR_RETURN(CollectiveScope::PostedExchange results,
                          PostAllgatherReceives(scope, tensor));
        uint8_t* own = Bytes(tensor.data) + parts.chunks[rank].offset;
        HVDD_RETURN_IF_ERROR(FinishReduceScatter(scope, parts, tensor, own, options));
        return FinishAllgather(scope, results, own, tensor);
      });
  if (!status.ok()) return status;
  return all_ready;
}

}  // namespace horovodd::internal
