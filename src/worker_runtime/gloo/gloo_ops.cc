#include "worker_runtime/gloo/gloo_ops.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/gloo/gloo_op_support.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/tensor/collective_args.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Results whose size the peers decide are built as `Tensor output` declared
// before the CollectiveScope: locals die in reverse order, so the memory
// outlives the buffers the scope registered on it, even on failure.

// Sends to_each[p] to every peer p; returns the header each rank sent us
// (ours at [rank]).
absl::StatusOr<std::vector<ArgumentHeader>> ExchangeHeaders(
    CollectiveScope& scope, const std::vector<ArgumentHeader>& to_each) {
  const int n = scope.size();
  constexpr size_t kBytes = ArgumentHeader::kWords * sizeof(int64_t);
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch outgoing, scope.RegisterScratch(n * kBytes));
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch incoming, scope.RegisterScratch(n * kBytes));

  std::vector<PeerRegion> regions(n);
  std::array<int64_t, ArgumentHeader::kWords> words;
  for (int peer = 0; peer < n; ++peer) {
    regions[peer] = PeerRegion{peer * kBytes, kBytes};
    to_each[peer].Encode(words.data());
    std::memcpy(outgoing.data + peer * kBytes, words.data(), kBytes);
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(outgoing.buffer, regions, incoming.buffer, regions,
                                             Channel::kMetadata));
  std::vector<ArgumentHeader> from_each(n);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == scope.rank()) {
      from_each[peer] = to_each[peer];
      continue;
    }
    std::memcpy(words.data(), incoming.data + peer * kBytes, kBytes);
    from_each[peer] = ArgumentHeader::Decode(words.data());
  }
  return from_each;
}

// From this many ranks, an allgather goes round the ring (n - 1 steps, each
// rank talking to its two neighbours only) instead of every rank sending to
// every other at once: a ring's first collectives (its host layout) then
// connect no pair beyond the neighbours, whatever the job's size.
constexpr int kRingAllgatherMinRanks = kAllPeersMaxRanks + 1;

// Every rank's `mine` round the ring; [r] is rank r's (ours at [rank]).
absl::StatusOr<std::vector<ArgumentHeader>> RingAllgatherHeaders(CollectiveScope& scope,
                                                                 const ArgumentHeader& mine) {
  const int n = scope.size();
  constexpr size_t kBytes = ArgumentHeader::kWords * sizeof(int64_t);
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch all, scope.RegisterScratch(n * kBytes));
  std::array<int64_t, ArgumentHeader::kWords> words;
  mine.Encode(words.data());
  std::memcpy(all.data + scope.rank() * kBytes, words.data(), kBytes);
  const RingLayout layout(DType::kInt64,
                          std::vector<int64_t>(n, static_cast<int64_t>(ArgumentHeader::kWords)));
  HVDD_RETURN_IF_ERROR(RingAllgather(scope, *all.buffer, layout));
  std::vector<ArgumentHeader> from_each(n);
  for (int peer = 0; peer < n; ++peer) {
    std::memcpy(words.data(), all.data + peer * kBytes, kBytes);
    from_each[peer] = ArgumentHeader::Decode(words.data());
  }
  return from_each;
}

// Byte regions of consecutive row blocks of `row_bytes` each.
std::vector<PeerRegion> RowBlocks(const std::vector<int64_t>& rows, size_t row_bytes) {
  std::vector<PeerRegion> blocks(rows.size());
  size_t offset = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    blocks[i] = PeerRegion{offset, static_cast<size_t>(rows[i]) * row_bytes};
    offset += blocks[i].bytes;
  }
  return blocks;
}

}  // namespace

absl::StatusOr<Tensor> Allgather(GlooContext& context, const TensorView& input) {
  const std::string label = "allgather";
  Tensor output;
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  absl::Status own_error = CheckTensor(label, input);
  if (own_error.ok()) own_error = NeedsDimension(label, input);

  const int n = scope.size();
  const bool by_ring = n >= kRingAllgatherMinRanks;
  const ArgumentHeader header = ArgumentHeader::Describe(input, own_error.ok());
  HVDD_ASSIGN_OR_RETURN(std::vector<ArgumentHeader> headers,
                        by_ring ? RingAllgatherHeaders(scope, header)
                                : ExchangeHeaders(scope, std::vector<ArgumentHeader>(n, header)));
  HVDD_RETURN_IF_ERROR(CheckAgreement(label, headers, own_error, ShapeRule::kSameTrailingDims));

  std::vector<int64_t> rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    rows[r] = headers[r].shape[0];
    total_rows += rows[r];
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  output = Tensor(input.dtype, std::move(shape));
  if (output.nbytes() == 0) return output;

  const std::vector<PeerRegion> blocks =
      RowBlocks(rows, static_cast<size_t>(input.row_numel()) * DTypeSize(input.dtype));
  const PeerRegion& mine = blocks[scope.rank()];
  if (mine.bytes > 0) std::memcpy(Bytes(output.data()) + mine.offset, input.data, mine.bytes);
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer,
                        scope.Register(output.data(), output.nbytes()));
  if (by_ring) {
    std::vector<int64_t> block_bytes(n);
    for (int r = 0; r < n; ++r) block_bytes[r] = static_cast<int64_t>(blocks[r].bytes);
    HVDD_RETURN_IF_ERROR(RingAllgather(scope, *buffer, RingLayout(DType::kUInt8, block_bytes)));
    return output;
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(buffer, std::vector<PeerRegion>(n, mine), buffer,
                                             blocks, Channel::kData));
  return output;
}

absl::Status Broadcast(GlooContext& context, TensorView inout, int root) {
  const std::string label = "broadcast";
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  HVDD_RETURN_IF_ERROR(CheckTensor(label, inout));
  const int n = scope.size();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is out of range for ", n, " ranks"));
  }
  const size_t bytes = inout.nbytes();
  if (bytes == 0 || n == 1) return absl::OkStatus();

  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer, scope.Register(inout.data, bytes));
  // Binomial tree over ranks relative to root: receive from the parent
  // (clear our lowest set bit), then send to children, largest subtree first.
  const int relative = (scope.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((relative & mask) == 0) continue;
    const int parent = (relative - mask + root) % n;
    HVDD_RETURN_IF_ERROR(scope.Recv(*buffer, parent, 0, bytes, Channel::kData));
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(*buffer));
    break;
  }
  int sends = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask >= n) continue;
    HVDD_RETURN_IF_ERROR(
        scope.Send(*buffer, (relative + mask + root) % n, 0, bytes, Channel::kData));
    ++sends;
  }
  for (int i = 0; i < sends; ++i) HVDD_RETURN_IF_ERROR(scope.WaitSend(*buffer));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Alltoall(GlooContext& context, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits) {
  const std::string label = "alltoall";
  Tensor output;
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  const int n = scope.size();
  AlltoallPlan plan = PlanAlltoall(label, input, splits, n);
  HVDD_ASSIGN_OR_RETURN(std::vector<ArgumentHeader> headers,
                        ExchangeHeaders(scope, plan.to_each));
  HVDD_RETURN_IF_ERROR(
      CheckAgreement(label, headers, plan.own_error, ShapeRule::kSameTrailingDims));

  std::vector<int64_t> recv_rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    recv_rows[r] = headers[r].extra;
    total_rows += recv_rows[r];
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  output = Tensor(input.dtype, std::move(shape));

  const size_t row_bytes = static_cast<size_t>(input.row_numel()) * DTypeSize(input.dtype);
  const std::vector<PeerRegion> to = RowBlocks(plan.send_rows, row_bytes);
  const std::vector<PeerRegion> from = RowBlocks(recv_rows, row_bytes);
  const int self = scope.rank();
  if (from[self].bytes > 0) {
    std::memcpy(Bytes(output.data()) + from[self].offset, Bytes(input.data) + to[self].offset,
                from[self].bytes);
  }
  gloo::transport::UnboundBuffer* send_buffer = nullptr;
  gloo::transport::UnboundBuffer* recv_buffer = nullptr;
  if (input.nbytes() > 0) {
    // Gloo only reads from a buffer it sends.
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* registered,
                          scope.Register(const_cast<void*>(input.data), input.nbytes()));
    send_buffer = registered;
  }
  if (output.nbytes() > 0) {
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* registered,
                          scope.Register(output.data(), output.nbytes()));
    recv_buffer = registered;
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(send_buffer, to, recv_buffer, from, Channel::kData));
  if (received_splits != nullptr) *received_splits = std::move(recv_rows);
  return output;
}

absl::StatusOr<Tensor> Reducescatter(GlooContext& context, const TensorView& input,
                                     const ReducescatterOptions& options) {
  const std::string label = "reducescatter";
  Tensor output;
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  const absl::Status own_error =
      ReducescatterArgsError(label, input, options.prescale_factor, options.postscale_factor);

  const int n = scope.size();
  HVDD_ASSIGN_OR_RETURN(
      std::vector<ArgumentHeader> headers,
      ExchangeHeaders(
          scope, std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok()))));
  HVDD_RETURN_IF_ERROR(CheckAgreement(label, headers, own_error, ShapeRule::kSameShape));

  const std::vector<int64_t> rows = EvenSplit(input.shape[0], n);
  std::vector<int64_t> shape = input.shape;
  shape[0] = rows[scope.rank()];
  output = Tensor(input.dtype, std::move(shape));
  if (input.nbytes() == 0) return output;

  // The ring reduces in place, and the input is the caller's: work on a copy.
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch work, scope.RegisterScratch(input.nbytes()));
  std::memcpy(work.data, input.data, input.nbytes());
  if (options.prescale_factor != 1.0) {
    ScaleInPlace(input.dtype, work.data, input.numel(), options.prescale_factor);
  }
  std::vector<int64_t> elements(n);
  for (int r = 0; r < n; ++r) elements[r] = rows[r] * input.row_numel();
  const RingLayout layout(input.dtype, std::move(elements));
  HVDD_RETURN_IF_ERROR(RingReduceScatter(scope, *work.buffer, layout, options.op));

  const ElementRange mine = layout.chunk(scope.rank());
  if (mine.count > 0) {
    std::memcpy(output.data(), work.data + mine.offset * layout.element_size(),
                mine.count * layout.element_size());
    FinishReduction(input.dtype, options.op, output.data(), mine.count, n,
                    options.postscale_factor);
  }
  return output;
}

absl::Status Barrier(GlooContext& context) {
  const std::string label = "barrier";
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  const int n = scope.size();
  if (n == 1) return absl::OkStatus();
  // Dissemination barrier: in round k, signal rank+2^k and hear from
  // rank-2^k; after ceil(log2 n) rounds everyone has heard from everyone.
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch tokens, scope.RegisterScratch(2));
  tokens.data[0] = 1;  // what is sent (any byte would do)
  for (int distance = 1; distance < n; distance <<= 1) {
    // Both first: each rank would otherwise wait on its left neighbour's
    // key while that neighbour waits on its own left one, all round.
    HVDD_RETURN_IF_ERROR(
        scope.Connect({(scope.rank() - distance + n) % n, (scope.rank() + distance) % n}));
    HVDD_RETURN_IF_ERROR(
        scope.Recv(*tokens.buffer, (scope.rank() - distance + n) % n, 1, 1, Channel::kData));
    HVDD_RETURN_IF_ERROR(
        scope.Send(*tokens.buffer, (scope.rank() + distance) % n, 0, 1, Channel::kData));
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(*tokens.buffer));
    HVDD_RETURN_IF_ERROR(scope.WaitSend(*tokens.buffer));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> AllgatherRecords(GlooContext& context, const void* mine,
                                                      size_t bytes) {
  const int n = context.size;
  const int rank = context.rank;
  // [i]: rank (rank + i) % n's record, filled from the front round by round;
  // declared before the scope, so that it outlives the buffer registered on it.
  std::vector<uint8_t> held(static_cast<size_t>(n) * bytes);
  CollectiveScope scope(context, "record allgather");
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  if (bytes > 0) std::memcpy(held.data(), mine, bytes);
  if (n > 1 && bytes > 0) {
    HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer* buffer,
                          scope.Register(held.data(), held.size()));
    // Every pair of every round at once: one rendezvous round trip, not one a round.
    std::vector<int> peers;
    for (int have = 1; have < n; have *= 2) {
      peers.push_back((rank - have + n) % n);
      peers.push_back((rank + have) % n);
    }
    HVDD_RETURN_IF_ERROR(scope.ConnectAtOnce(peers, absl::StrCat("records", scope.sequence())));
    for (int have = 1; have < n; have *= 2) {
      const size_t count = static_cast<size_t>(std::min(have, n - have));
      const int to = (rank - have + n) % n;
      const int from = (rank + have) % n;
      HVDD_RETURN_IF_ERROR(scope.Recv(*buffer, from, have * bytes, count * bytes, Channel::kData));
      HVDD_RETURN_IF_ERROR(scope.Send(*buffer, to, 0, count * bytes, Channel::kData));
      HVDD_RETURN_IF_ERROR(scope.WaitRecv(*buffer));
      HVDD_RETURN_IF_ERROR(scope.WaitSend(*buffer));
    }
  }
  std::vector<uint8_t> all(held.size());
  for (int i = 0; i < n; ++i) {
    if (bytes == 0) break;
    std::memcpy(all.data() + static_cast<size_t>((rank + i) % n) * bytes,
                held.data() + static_cast<size_t>(i) * bytes, bytes);
  }
  return all;
}

}  // namespace horovodd::internal
