#include "gloo_ops.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collective_args.h"
#include "gloo_context.h"
#include "gloo_ring.h"
#include "gloo_transfer.h"
#include "reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Results whose size the peers decide are built as `Tensor output` declared
// before the CollectiveScope: locals die in reverse order, so the memory
// outlives the buffers the scope registered on it, even on failure.

std::string Label(const char* op, const std::string& name) {
  return name.empty() ? std::string(op) : absl::StrCat(op, " '", name, "'");
}

absl::StatusOr<GlooContext*> OurContext(gloo::Context& context, const std::string& label) {
  auto* ours = dynamic_cast<GlooContext*>(&context);
  if (ours == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": the gloo context was not made by ConnectGlooContext"));
  }
  return ours;
}

uint8_t* Bytes(void* data) { return static_cast<uint8_t*>(data); }

// Sends to_each[p] to every peer p; returns the header each rank sent us
// (ours at [rank]).
absl::StatusOr<std::vector<ArgumentHeader>> ExchangeHeaders(
    CollectiveScope& scope, const std::vector<ArgumentHeader>& to_each) {
  const int n = scope.size();
  constexpr size_t kBytes = ArgumentHeader::kWords * sizeof(int64_t);
  absl::StatusOr<CollectiveScope::Scratch> outgoing = scope.RegisterScratch(n * kBytes);
  if (!outgoing.ok()) return outgoing.status();
  absl::StatusOr<CollectiveScope::Scratch> incoming = scope.RegisterScratch(n * kBytes);
  if (!incoming.ok()) return incoming.status();

  std::vector<PeerRegion> regions(n);
  std::array<int64_t, ArgumentHeader::kWords> words;
  for (int peer = 0; peer < n; ++peer) {
    regions[peer] = PeerRegion{peer * kBytes, kBytes};
    to_each[peer].Encode(words.data());
    std::memcpy(outgoing->data + peer * kBytes, words.data(), kBytes);
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(outgoing->buffer, regions, incoming->buffer,
                                             regions, Channel::kMetadata));
  std::vector<ArgumentHeader> from_each(n);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == scope.rank()) {
      from_each[peer] = to_each[peer];
      continue;
    }
    std::memcpy(words.data(), incoming->data + peer * kBytes, kBytes);
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

// Up to this many bytes sent per rank ((ranks - 1) x the tensor), an
// allreduce sends its whole tensor to every peer and each rank reduces all
// of them itself: one message hop instead of the ring's 2 (ranks - 1), each
// of which waits for a process to be scheduled. Past it the ring's
// bandwidth wins.
constexpr size_t kDirectAllreduceMaxBytesSent = size_t{256} << 10;

// Every rank reduces the same contributions in rank order, so every rank
// ends with the same bits.
absl::Status DirectAllreduce(CollectiveScope& scope, TensorView inout, ReduceOp op,
                             double postscale_factor) {
  const int n = scope.size();
  const size_t bytes = inout.nbytes();
  absl::StatusOr<CollectiveScope::Scratch> all = scope.RegisterScratch(n * bytes);
  if (!all.ok()) return all.status();
  std::memcpy(all->data + scope.rank() * bytes, inout.data, bytes);
  std::vector<PeerRegion> from(n);
  for (int p = 0; p < n; ++p) from[p] = PeerRegion{p * bytes, bytes};
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(all->buffer,
                                             std::vector<PeerRegion>(n, from[scope.rank()]),
                                             all->buffer, from, Channel::kData));
  std::memcpy(inout.data, all->data, bytes);
  for (int p = 1; p < n; ++p) {
    ReduceInto(inout.dtype, op, inout.data, all->data + p * bytes, inout.numel());
  }
  FinishReduction(inout.dtype, op, inout.data, inout.numel(), n, postscale_factor);
  return absl::OkStatus();
}

// From 3 ranks, while the scratch it needs (a tensor's worth) stays in the
// context's pool, an allreduce is a reduce-scatter and an allgather that
// each exchange with every peer at once: the ring's bytes in 2 rounds
// instead of 2 (ranks - 1), each of which waits for a process to be
// scheduled. Measured at 4 ranks on loopback (2 cores): 1 MiB went from
// 0.85 to 1.04 x raw Gloo's ring, 4 MiB from 0.78 to 0.91, 16 MiB the same.
// Past that the ring's pipelining and its two segment slots win, as they do
// at 2 ranks, where both are one round anyway; and past 16 ranks the parts
// get small and the peers many.
constexpr int kPairwiseAllreduceMaxRanks = 16;

bool UsesPairwiseAllreduce(const TensorView& tensor, int ranks) {
  if (ranks < 3 || ranks > kPairwiseAllreduceMaxRanks) return false;
  const size_t largest_chunk = static_cast<size_t>((tensor.numel() + ranks - 1) / ranks);
  return static_cast<size_t>(ranks) * largest_chunk * DTypeSize(tensor.dtype) <=
         ScratchPool::kMaxKeptBytes;
}

// Rank r owns chunk r (EvenSplit): every rank sends each owner its part,
// the owner reduces the parts in rank order (so every rank ends with the
// owner's bits), and sends the result to everyone.
absl::Status PairwiseAllreduce(CollectiveScope& scope, TensorView inout, ReduceOp op,
                               double postscale_factor) {
  const int n = scope.size();
  const int rank = scope.rank();
  const size_t element_size = DTypeSize(inout.dtype);
  const std::vector<int64_t> counts = EvenSplit(inout.numel(), n);
  std::vector<PeerRegion> chunks(n);
  size_t offset = 0;
  for (int p = 0; p < n; ++p) {
    chunks[p] = PeerRegion{offset, static_cast<size_t>(counts[p]) * element_size};
    offset += chunks[p].bytes;
  }
  const size_t own_bytes = chunks[rank].bytes;
  uint8_t* own = Bytes(inout.data) + chunks[rank].offset;
  absl::StatusOr<gloo::transport::UnboundBuffer*> buffer =
      scope.Register(inout.data, inout.nbytes());
  if (!buffer.ok()) return buffer.status();

  // Slot p of `parts` gets rank p's part of our chunk, each its own Gloo
  // buffer so that it can be waited for alone; our own part goes to our
  // slot, since the fold below overwrites the chunk.
  absl::StatusOr<CollectiveScope::Scratch> parts = scope.RegisterScratch(n * own_bytes);
  if (!parts.ok()) return parts.status();
  std::vector<gloo::transport::UnboundBuffer*> slots(n, nullptr);
  for (int p = 0; p < n; ++p) {
    if (p == rank || own_bytes == 0) continue;
    absl::StatusOr<gloo::transport::UnboundBuffer*> slot =
        scope.Register(parts->data + p * own_bytes, own_bytes);
    if (!slot.ok()) return slot.status();
    slots[p] = *slot;
    HVDD_RETURN_IF_ERROR(scope.Recv(**slot, p, 0, own_bytes, Channel::kData));
  }
  for (int p = 0; p < n; ++p) {
    if (p == rank || chunks[p].bytes == 0) continue;
    HVDD_RETURN_IF_ERROR(
        scope.Send(**buffer, p, chunks[p].offset, chunks[p].bytes, Channel::kData));
  }
  if (own_bytes > 0) {
    if (rank != 0) std::memcpy(parts->data + rank * own_bytes, own, own_bytes);
    for (int p = 0; p < n; ++p) {
      if (p != rank) HVDD_RETURN_IF_ERROR(scope.WaitRecv(*slots[p]));
      if (p == 0) {
        if (rank != 0) std::memcpy(own, parts->data, own_bytes);
      } else {
        ReduceInto(inout.dtype, op, own, parts->data + p * own_bytes, counts[rank]);
      }
    }
    FinishReduction(inout.dtype, op, own, counts[rank], n, postscale_factor);
  }
  // Our sends read the chunks the results will land in: done first.
  for (int p = 0; p < n; ++p) {
    if (p != rank && chunks[p].bytes > 0) HVDD_RETURN_IF_ERROR(scope.WaitSend(**buffer));
  }
  return scope.ExchangeWithAll(*buffer, std::vector<PeerRegion>(n, chunks[rank]), *buffer,
                               chunks, Channel::kResult);
}

}  // namespace

absl::Status Allreduce(gloo::Context& context, TensorView inout,
                       const AllreduceOptions& options) {
  const std::string label = Label("allreduce", options.name);
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  HVDD_RETURN_IF_ERROR(CheckTensor(label, inout));
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "prescale_factor", options.prescale_factor));
  HVDD_RETURN_IF_ERROR(CheckScaleFactor(label, "postscale_factor", options.postscale_factor));
  const int64_t count = inout.numel();
  if (count == 0) return absl::OkStatus();

  if (options.prescale_factor != 1.0) {
    ScaleInPlace(inout.dtype, inout.data, count, options.prescale_factor);
  }
  if (scope.size() > 1 &&
      inout.nbytes() * static_cast<size_t>(scope.size() - 1) <= kDirectAllreduceMaxBytesSent) {
    return DirectAllreduce(scope, inout, options.op, options.postscale_factor);
  }
  if (UsesPairwiseAllreduce(inout, scope.size())) {
    return PairwiseAllreduce(scope, inout, options.op, options.postscale_factor);
  }
  absl::StatusOr<gloo::transport::UnboundBuffer*> buffer =
      scope.Register(inout.data, inout.nbytes());
  if (!buffer.ok()) return buffer.status();
  const RingLayout layout(inout.dtype, EvenSplit(count, scope.size()));
  HVDD_RETURN_IF_ERROR(RingReduceScatter(scope, **buffer, layout, options.op));
  // Finish our chunk before sharing it, so every rank ends with the owner's
  // bits and the division runs once per element, not once per rank.
  const ElementRange mine = layout.chunk(scope.rank());
  FinishReduction(inout.dtype, options.op,
                  Bytes(inout.data) + mine.offset * layout.element_size(), mine.count,
                  scope.size(), options.postscale_factor);
  return RingAllgather(scope, **buffer, layout);
}

absl::StatusOr<Tensor> Allgather(gloo::Context& context, const TensorView& input) {
  const std::string label = "allgather";
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  Tensor output;
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  absl::Status own_error = CheckTensor(label, input);
  if (own_error.ok()) own_error = NeedsDimension(label, input);

  const int n = scope.size();
  absl::StatusOr<std::vector<ArgumentHeader>> headers = ExchangeHeaders(
      scope, std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok())));
  if (!headers.ok()) return headers.status();
  HVDD_RETURN_IF_ERROR(
      CheckAgreement(label, *headers, own_error, ShapeRule::kSameTrailingDims));

  std::vector<int64_t> rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    rows[r] = (*headers)[r].shape[0];
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
  absl::StatusOr<gloo::transport::UnboundBuffer*> buffer =
      scope.Register(output.data(), output.nbytes());
  if (!buffer.ok()) return buffer.status();
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(*buffer, std::vector<PeerRegion>(n, mine), *buffer,
                                             blocks, Channel::kData));
  return output;
}

absl::Status Broadcast(gloo::Context& context, TensorView inout, int root) {
  const std::string label = "broadcast";
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  HVDD_RETURN_IF_ERROR(CheckTensor(label, inout));
  const int n = scope.size();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is out of range for ", n, " ranks"));
  }
  const size_t bytes = inout.nbytes();
  if (bytes == 0 || n == 1) return absl::OkStatus();

  absl::StatusOr<gloo::transport::UnboundBuffer*> buffer = scope.Register(inout.data, bytes);
  if (!buffer.ok()) return buffer.status();
  // Binomial tree over ranks relative to root: receive from the parent
  // (clear our lowest set bit), then send to children, largest subtree first.
  const int relative = (scope.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((relative & mask) == 0) continue;
    const int parent = (relative - mask + root) % n;
    HVDD_RETURN_IF_ERROR(scope.Recv(**buffer, parent, 0, bytes, Channel::kData));
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(**buffer));
    break;
  }
  int sends = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask >= n) continue;
    HVDD_RETURN_IF_ERROR(
        scope.Send(**buffer, (relative + mask + root) % n, 0, bytes, Channel::kData));
    ++sends;
  }
  for (int i = 0; i < sends; ++i) HVDD_RETURN_IF_ERROR(scope.WaitSend(**buffer));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Alltoall(gloo::Context& context, const TensorView& input,
                                const std::vector<int64_t>& splits,
                                std::vector<int64_t>* received_splits) {
  const std::string label = "alltoall";
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  Tensor output;
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  const int n = scope.size();
  absl::Status own_error = CheckTensor(label, input);
  std::vector<int64_t> send_rows(n, 0);
  if (own_error.ok()) {
    absl::StatusOr<std::vector<int64_t>> resolved = ResolveSplits(label, input, splits, n);
    if (resolved.ok()) {
      send_rows = *std::move(resolved);
    } else {
      own_error = resolved.status();
    }
  }

  std::vector<ArgumentHeader> to_each(n, ArgumentHeader::Describe(input, own_error.ok()));
  for (int peer = 0; peer < n; ++peer) to_each[peer].extra = send_rows[peer];
  absl::StatusOr<std::vector<ArgumentHeader>> headers = ExchangeHeaders(scope, to_each);
  if (!headers.ok()) return headers.status();
  HVDD_RETURN_IF_ERROR(
      CheckAgreement(label, *headers, own_error, ShapeRule::kSameTrailingDims));

  std::vector<int64_t> recv_rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    recv_rows[r] = (*headers)[r].extra;
    total_rows += recv_rows[r];
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  output = Tensor(input.dtype, std::move(shape));

  const size_t row_bytes = static_cast<size_t>(input.row_numel()) * DTypeSize(input.dtype);
  const std::vector<PeerRegion> to = RowBlocks(send_rows, row_bytes);
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
    absl::StatusOr<gloo::transport::UnboundBuffer*> registered =
        scope.Register(const_cast<void*>(input.data), input.nbytes());
    if (!registered.ok()) return registered.status();
    send_buffer = *registered;
  }
  if (output.nbytes() > 0) {
    absl::StatusOr<gloo::transport::UnboundBuffer*> registered =
        scope.Register(output.data(), output.nbytes());
    if (!registered.ok()) return registered.status();
    recv_buffer = *registered;
  }
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(send_buffer, to, recv_buffer, from, Channel::kData));
  if (received_splits != nullptr) *received_splits = std::move(recv_rows);
  return output;
}

absl::StatusOr<Tensor> Reducescatter(gloo::Context& context, const TensorView& input,
                                     ReduceOp op, double prescale_factor,
                                     double postscale_factor) {
  const std::string label = "reducescatter";
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  Tensor output;
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  absl::Status own_error = CheckTensor(label, input);
  if (own_error.ok()) own_error = NeedsDimension(label, input);
  if (own_error.ok()) own_error = CheckScaleFactor(label, "prescale_factor", prescale_factor);
  if (own_error.ok()) own_error = CheckScaleFactor(label, "postscale_factor", postscale_factor);

  const int n = scope.size();
  absl::StatusOr<std::vector<ArgumentHeader>> headers = ExchangeHeaders(
      scope, std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok())));
  if (!headers.ok()) return headers.status();
  HVDD_RETURN_IF_ERROR(CheckAgreement(label, *headers, own_error, ShapeRule::kSameShape));

  const std::vector<int64_t> rows = EvenSplit(input.shape[0], n);
  std::vector<int64_t> shape = input.shape;
  shape[0] = rows[scope.rank()];
  output = Tensor(input.dtype, std::move(shape));
  if (input.nbytes() == 0) return output;

  // The ring reduces in place, and the input is the caller's: work on a copy.
  absl::StatusOr<CollectiveScope::Scratch> work = scope.RegisterScratch(input.nbytes());
  if (!work.ok()) return work.status();
  std::memcpy(work->data, input.data, input.nbytes());
  if (prescale_factor != 1.0) {
    ScaleInPlace(input.dtype, work->data, input.numel(), prescale_factor);
  }
  std::vector<int64_t> elements(n);
  for (int r = 0; r < n; ++r) elements[r] = rows[r] * input.row_numel();
  const RingLayout layout(input.dtype, std::move(elements));
  HVDD_RETURN_IF_ERROR(RingReduceScatter(scope, *work->buffer, layout, op));

  const ElementRange mine = layout.chunk(scope.rank());
  if (mine.count > 0) {
    std::memcpy(output.data(), work->data + mine.offset * layout.element_size(),
                mine.count * layout.element_size());
    FinishReduction(input.dtype, op, output.data(), mine.count, n, postscale_factor);
  }
  return output;
}

absl::Status Barrier(gloo::Context& context) {
  const std::string label = "barrier";
  absl::StatusOr<GlooContext*> ours = OurContext(context, label);
  if (!ours.ok()) return ours.status();
  CollectiveScope scope(**ours, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  const int n = scope.size();
  if (n == 1) return absl::OkStatus();
  // Dissemination barrier: in round k, signal rank+2^k and hear from
  // rank-2^k; after ceil(log2 n) rounds everyone has heard from everyone.
  absl::StatusOr<CollectiveScope::Scratch> tokens = scope.RegisterScratch(2);
  if (!tokens.ok()) return tokens.status();
  tokens->data[0] = 1;  // what is sent (any byte would do)
  for (int distance = 1; distance < n; distance <<= 1) {
    HVDD_RETURN_IF_ERROR(scope.Recv(*tokens->buffer, (scope.rank() - distance + n) % n, 1, 1,
                                    Channel::kData));
    HVDD_RETURN_IF_ERROR(
        scope.Send(*tokens->buffer, (scope.rank() + distance) % n, 0, 1, Channel::kData));
    HVDD_RETURN_IF_ERROR(scope.WaitRecv(*tokens->buffer));
    HVDD_RETURN_IF_ERROR(scope.WaitSend(*tokens->buffer));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::internal
