// The NCCL collectives whose output size comes from the peers' headers:
// allgather and alltoall, plus the header exchange they share with
// reducescatter.
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/nccl/nccl_args.h"
#include "worker_runtime/nccl/nccl_ops.h"
#include "worker_runtime/nccl/nccl_status.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {
namespace {

// Who sends which rows where: block p of the input (rows [send_first[p],
// send_first[p] + send_rows[p])) goes to rank p, and block p of the output
// (likewise with recv_*) comes from rank p.
struct RowExchange {
  const void* input = nullptr;
  std::vector<int64_t> send_first;
  std::vector<int64_t> send_rows;
  void* output = nullptr;
  std::vector<int64_t> recv_first;
  std::vector<int64_t> recv_rows;
  size_t row_numel = 0;
  size_t row_bytes = 0;
  ncclDataType_t type = ncclInt8;
};

// Queues our own block as a device-to-device copy (NCCL does not send to
// itself) and, in one group, the sends and receives for every peer.
absl::Status ExchangeRows(NcclComm& comm, const std::string& label, const RowExchange& x) {
  const auto* from = static_cast<const unsigned char*>(x.input);
  auto* to = static_cast<unsigned char*>(x.output);
  const int self = comm.rank();
  if (x.recv_rows[self] > 0) {
    HVDD_RETURN_IF_ERROR(comm.CudaEnqueued(
        cudaMemcpyAsync(to + x.recv_first[self] * x.row_bytes,
                        from + x.send_first[self] * x.row_bytes, x.recv_rows[self] * x.row_bytes,
                        cudaMemcpyDeviceToDevice, comm.stream()),
        absl::StrCat(label, ": copying our own rows")));
  }
  return comm.Group(absl::StrCat(label, ": send/receive"), [&]() -> absl::Status {
    for (int peer = 0; peer < comm.size(); ++peer) {
      if (peer == self) continue;
      if (x.send_rows[peer] > 0) {
        const ncclResult_t sent =
            ncclSend(from + x.send_first[peer] * x.row_bytes, x.send_rows[peer] * x.row_numel,
                     x.type, peer, comm.handle(), comm.stream());
        if (sent != ncclSuccess) {
          return NcclStatus(sent, absl::StrCat(label, ": ncclSend to rank ", peer),
                            ncclGetLastError(comm.handle()));
        }
      }
      if (x.recv_rows[peer] > 0) {
        const ncclResult_t received =
            ncclRecv(to + x.recv_first[peer] * x.row_bytes, x.recv_rows[peer] * x.row_numel, x.type,
                     peer, comm.handle(), comm.stream());
        if (received != ncclSuccess) {
          return NcclStatus(received, absl::StrCat(label, ": ncclRecv from rank ", peer),
                            ncclGetLastError(comm.handle()));
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<std::vector<ArgumentHeader>> ExchangeHeaders(
    NcclComm& comm, const std::string& label, const std::vector<ArgumentHeader>& to_each) {
  const int n = comm.size();
  std::vector<ArgumentHeader> from_each(n);
  from_each[comm.rank()] = to_each[comm.rank()];
  if (n == 1) return from_each;

  // Pinned [outgoing headers | incoming headers], one int64 block per rank.
  constexpr size_t kBlock = ArgumentHeader::kWords * sizeof(int64_t);
  const size_t half = n * kBlock;
  HVDD_ASSIGN_OR_RETURN(void* const pinned, comm.PinnedScratch(2 * half));
  auto* host = static_cast<unsigned char*>(pinned);
  for (int peer = 0; peer < n; ++peer) {
    to_each[peer].Encode(reinterpret_cast<int64_t*>(host + peer * kBlock));
  }
  const std::string what = absl::StrCat(label, " (shapes)");
  HVDD_RETURN_IF_ERROR(comm.Run(what, [&](NcclComm& c) -> absl::Status {
    HVDD_ASSIGN_OR_RETURN(StreamBuffer device, StreamBuffer::Allocate(c, 2 * half));
    absl::Status s = c.CudaEnqueued(
        cudaMemcpyAsync(device.data(), host, half, cudaMemcpyHostToDevice, c.stream()),
        absl::StrCat(what, ": copying headers to the GPU"));
    if (s.ok()) {
      // Header p goes to rank p; rank p's header for us lands in block p.
      RowExchange x;
      x.input = device.data();
      x.output = device.bytes() + half;
      x.send_rows.assign(n, 1);
      x.send_first = RowOffsets(x.send_rows);
      x.recv_rows = x.send_rows;
      x.recv_first = x.send_first;
      x.row_numel = ArgumentHeader::kWords;
      x.row_bytes = kBlock;
      x.type = ncclInt64;
      s = ExchangeRows(c, what, x);
    }
    if (s.ok()) {
      s = c.CudaEnqueued(cudaMemcpyAsync(host + half, device.bytes() + half, half,
                                         cudaMemcpyDeviceToHost, c.stream()),
                         absl::StrCat(what, ": copying headers from the GPU"));
    }
    return s;
  }));
  for (int peer = 0; peer < n; ++peer) {
    if (peer == comm.rank()) continue;
    from_each[peer] =
        ArgumentHeader::Decode(reinterpret_cast<const int64_t*>(host + half + peer * kBlock));
  }
  return from_each;
}

absl::StatusOr<DeviceTensor> Allgather(NcclComm& comm, const TensorView& input) {
  const std::string label = "allgather";
  if (!comm.health().ok()) return comm.health();
  absl::Status own_error = CheckGpuTensor(label, input, comm.device());
  if (own_error.ok()) own_error = NeedsDimension(label, input);

  const int n = comm.size();
  HVDD_ASSIGN_OR_RETURN(
      const std::vector<ArgumentHeader> headers,
      ExchangeHeaders(
          comm, label,
          std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok()))));
  if (absl::Status agreed = CheckAgreement(label, headers, own_error, ShapeRule::kSameTrailingDims);
      !agreed.ok()) {
    return agreed;
  }

  std::vector<int64_t> rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    rows[r] = headers[r].shape[0];
    total_rows += rows[r];
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  absl::StatusOr<DeviceTensor> output = DeviceTensor::Create(comm.device(), input.dtype, shape);
  if (!output.ok() || output->nbytes() == 0) return output;

  const size_t row_numel = static_cast<size_t>(input.row_numel());
  const size_t row_bytes = row_numel * DTypeSize(input.dtype);
  const ncclDataType_t type = NcclDataType(input.dtype);
  HVDD_RETURN_IF_ERROR(comm.Run(label, [&](NcclComm& c) {
    if (AllEqual(rows)) {
      return c.Enqueued(ncclAllGather(input.data, output->data(), rows[0] * row_numel, type,
                                      c.handle(), c.stream()),
                        absl::StrCat(label, ": ncclAllGather"));
    }
    // Every rank sends its whole input to every peer.
    RowExchange x;
    x.input = input.data;
    x.send_rows.assign(n, rows[c.rank()]);
    x.send_first.assign(n, 0);
    x.output = output->data();
    x.recv_rows = rows;
    x.recv_first = RowOffsets(rows);
    x.row_numel = row_numel;
    x.row_bytes = row_bytes;
    x.type = type;
    return ExchangeRows(c, label, x);
  }));
  return output;
}

absl::StatusOr<DeviceTensor> Alltoall(NcclComm& comm, const TensorView& input,
                                      const std::vector<int64_t>& splits,
                                      std::vector<int64_t>* received_splits) {
  const std::string label = "alltoall";
  if (!comm.health().ok()) return comm.health();
  const int n = comm.size();
  absl::Status own_error = CheckGpuTensor(label, input, comm.device());
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
  HVDD_ASSIGN_OR_RETURN(const std::vector<ArgumentHeader> headers,
                        ExchangeHeaders(comm, label, to_each));
  if (absl::Status agreed = CheckAgreement(label, headers, own_error, ShapeRule::kSameTrailingDims);
      !agreed.ok()) {
    return agreed;
  }

  std::vector<int64_t> recv_rows(n);
  int64_t total_rows = 0;
  for (int r = 0; r < n; ++r) {
    recv_rows[r] = headers[r].extra;
    total_rows += recv_rows[r];
  }
  std::vector<int64_t> shape = input.shape;
  shape[0] = total_rows;
  absl::StatusOr<DeviceTensor> output = DeviceTensor::Create(comm.device(), input.dtype, shape);
  if (!output.ok()) return output;

  const size_t row_numel = static_cast<size_t>(input.row_numel());
  const size_t row_bytes = row_numel * DTypeSize(input.dtype);
  if (input.nbytes() > 0 || output->nbytes() > 0) {
    RowExchange x;
    x.input = input.data;
    x.send_rows = send_rows;
    x.send_first = RowOffsets(send_rows);
    x.output = output->data();
    x.recv_rows = recv_rows;
    x.recv_first = RowOffsets(recv_rows);
    x.row_numel = row_numel;
    x.row_bytes = row_bytes;
    x.type = NcclDataType(input.dtype);
    HVDD_RETURN_IF_ERROR(comm.Run(label, [&](NcclComm& c) { return ExchangeRows(c, label, x); }));
  }
  if (received_splits != nullptr) *received_splits = std::move(recv_rows);
  return output;
}

}  // namespace horovodd::internal
