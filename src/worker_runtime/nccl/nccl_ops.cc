#include "worker_runtime/nccl/nccl_ops.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/nccl/nccl_args.h"
#include "worker_runtime/nccl/nccl_scale.h"
#include "worker_runtime/nccl/nccl_status.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {
namespace {

absl::Status Scale(NcclComm& comm, DType dtype, const void* input, void* output, size_t count,
                   double factor) {
  return comm.CudaEnqueued(LaunchScale(dtype, input, output, count, factor, comm.stream()),
                           absl::StrCat("scaling by ", factor));
}

}  // namespace

absl::Status Allreduce(NcclComm& comm, TensorView inout, const AllreduceOptions& options) {
  const std::string label = OpLabel("allreduce", options.name);
  if (!comm.health().ok()) return comm.health();
  if (absl::Status valid = CheckGpuTensor(label, inout, comm.device()); !valid.ok()) return valid;
  if (absl::Status valid = CheckNcclReducible(label, inout.dtype); !valid.ok()) return valid;
  for (const auto& [name, factor] : {std::pair{"prescale_factor", options.prescale_factor},
                                     std::pair{"postscale_factor", options.postscale_factor}}) {
    if (absl::Status valid = CheckScaleFactor(label, name, factor); !valid.ok()) return valid;
  }
  const size_t count = static_cast<size_t>(inout.numel());
  if (count == 0) return absl::OkStatus();
  return comm.Run(label, [&](NcclComm& c) -> absl::Status {
    if (options.prescale_factor != 1.0) {
      if (absl::Status s =
              Scale(c, inout.dtype, inout.data, inout.data, count, options.prescale_factor);
          !s.ok()) {
        return s;
      }
    }
    absl::Status reduced =
        c.Enqueued(ncclAllReduce(inout.data, inout.data, count, NcclDataType(inout.dtype),
                                 NcclReduceOp(options.op), c.handle(), c.stream()),
                   absl::StrCat(label, ": ncclAllReduce"));
    if (!reduced.ok() || options.postscale_factor == 1.0) return reduced;
    return Scale(c, inout.dtype, inout.data, inout.data, count, options.postscale_factor);
  });
}

absl::Status Broadcast(NcclComm& comm, TensorView inout, int root) {
  const std::string label = "broadcast";
  if (!comm.health().ok()) return comm.health();
  if (absl::Status valid = CheckGpuTensor(label, inout, comm.device()); !valid.ok()) return valid;
  if (root < 0 || root >= comm.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": root ", root, " is out of range for ", comm.size(), " ranks"));
  }
  const size_t count = static_cast<size_t>(inout.numel());
  if (count == 0) return absl::OkStatus();
  return comm.Run(label, [&](NcclComm& c) {
    return c.Enqueued(ncclBroadcast(inout.data, inout.data, count, NcclDataType(inout.dtype), root,
                                    c.handle(), c.stream()),
                      absl::StrCat(label, ": ncclBroadcast"));
  });
}

absl::StatusOr<DeviceTensor> Reducescatter(NcclComm& comm, const TensorView& input,
                                           const ReducescatterOptions& options) {
  const ReduceOp op = options.op;
  const double prescale_factor = options.prescale_factor;
  const double postscale_factor = options.postscale_factor;
  const std::string label = "reducescatter";
  if (!comm.health().ok()) return comm.health();
  absl::Status own_error = CheckGpuTensor(label, input, comm.device());
  if (own_error.ok()) own_error = NeedsDimension(label, input);
  if (own_error.ok()) own_error = CheckNcclReducible(label, input.dtype);
  if (own_error.ok()) own_error = CheckScaleFactor(label, "prescale_factor", prescale_factor);
  if (own_error.ok()) own_error = CheckScaleFactor(label, "postscale_factor", postscale_factor);

  const int n = comm.size();
  HVDD_ASSIGN_OR_RETURN(
      const std::vector<ArgumentHeader> headers,
      ExchangeHeaders(
          comm, label,
          std::vector<ArgumentHeader>(n, ArgumentHeader::Describe(input, own_error.ok()))));
  if (absl::Status agreed = CheckAgreement(label, headers, own_error, ShapeRule::kSameShape);
      !agreed.ok()) {
    return agreed;
  }

  const std::vector<int64_t> rows = EvenRows(input.shape[0], n);
  const std::vector<int64_t> first_row = RowOffsets(rows);
  std::vector<int64_t> shape = input.shape;
  shape[0] = rows[comm.rank()];
  absl::StatusOr<DeviceTensor> output = DeviceTensor::Create(comm.device(), input.dtype, shape);
  if (!output.ok() || input.nbytes() == 0) return output;

  const size_t row_numel = static_cast<size_t>(input.row_numel());
  const size_t element_bytes = DTypeSize(input.dtype);
  const ncclDataType_t type = NcclDataType(input.dtype);
  HVDD_RETURN_IF_ERROR(comm.Run(label, [&](NcclComm& c) -> absl::Status {
    // The input is the caller's: a prescale works on a scaled copy.
    const unsigned char* source = static_cast<const unsigned char*>(input.data);
    HVDD_ASSIGN_OR_RETURN(StreamBuffer scaled,
                          StreamBuffer::Allocate(c, prescale_factor != 1.0 ? input.nbytes() : 0));
    if (prescale_factor != 1.0) {
      if (absl::Status s = Scale(c, input.dtype, source, scaled.data(),
                                 static_cast<size_t>(input.numel()), prescale_factor);
          !s.ok()) {
        return s;
      }
      source = scaled.bytes();
    }
    absl::Status reduced;
    if (AllEqual(rows)) {
      reduced = c.Enqueued(ncclReduceScatter(source, output->data(), rows[0] * row_numel, type,
                                             NcclReduceOp(op), c.handle(), c.stream()),
                           absl::StrCat(label, ": ncclReduceScatter"));
    } else {
      reduced = c.Group(absl::StrCat(label, ": ncclReduce per rank"), [&]() -> absl::Status {
        for (int r = 0; r < n; ++r) {
          if (rows[r] == 0) continue;
          const unsigned char* slice = source + first_row[r] * row_numel * element_bytes;
          // Only the root writes its receive buffer; the others get their
          // own slice, which NCCL leaves alone.
          void* receive = r == c.rank() ? output->data() : const_cast<unsigned char*>(slice);
          const ncclResult_t queued = ncclReduce(slice, receive, rows[r] * row_numel, type,
                                                 NcclReduceOp(op), r, c.handle(), c.stream());
          if (queued != ncclSuccess) {
            return NcclStatus(queued, absl::StrCat(label, ": ncclReduce to rank ", r),
                              ncclGetLastError(c.handle()));
          }
        }
        return absl::OkStatus();
      });
    }
    if (!reduced.ok() || postscale_factor == 1.0) return reduced;
    return Scale(c, input.dtype, output->data(), output->data(),
                 static_cast<size_t>(output->numel()), postscale_factor);
  }));
  return output;
}

}  // namespace horovodd::internal
