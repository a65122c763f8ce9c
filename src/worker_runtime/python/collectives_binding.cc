// The collectives on caller-owned memory. In-place ones end in `_`; the rest
// return numpy arrays that own their results.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/python/tensor_args.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

py::array TensorOrThrow(absl::StatusOr<Tensor> result) {
  ThrowIfError(result.status());
  return ToNumpy(*std::move(result));
}

}  // namespace

void BindCollectives(py::module_& module) {
  py::enum_<ReduceOp>(module, "ReduceOp", "How allreduce and reducescatter combine ranks.")
      .value("Sum", ReduceOp::kSum)
      .value("Average", ReduceOp::kAverage)
      .value("Min", ReduceOp::kMin)
      .value("Max", ReduceOp::kMax)
      .value("Product", ReduceOp::kProduct);

  module.def(
      "allreduce_",
      [](const TensorView& inout, ReduceOp op, double prescale_factor, double postscale_factor,
         std::string name) {
        RequireInit("allreduce");
        AllreduceOptions options;
        options.op = op;
        options.prescale_factor = prescale_factor;
        options.postscale_factor = postscale_factor;
        options.name = std::move(name);
        ThrowIfError(WithoutGil([&] { return Allreduce(inout, options); }));
      },
      py::arg("inout"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name") = "",
      "In place: every rank ends with op over all ranks' tensors (each multiplied by "
      "prescale_factor first), multiplied by postscale_factor. Every rank must pass the "
      "same dtype and element count.");
  module.def(
      "allgather",
      [](const TensorView& input) {
        RequireInit("allgather");
        return TensorOrThrow(WithoutGil([&] { return Allgather(input); }));
      },
      py::arg("input"),
      "All ranks' tensors concatenated along the first dimension, in rank order.");
  module.def(
      "broadcast_",
      [](const TensorView& inout, int root_rank) {
        RequireInit("broadcast");
        ThrowIfError(WithoutGil([&] { return Broadcast(inout, root_rank); }));
      },
      py::arg("inout"), py::arg("root_rank"), "In place: every rank ends with root_rank's tensor.");
  module.def(
      "alltoall",
      [](const TensorView& input, std::vector<int64_t> splits) {
        RequireInit("alltoall");
        std::vector<int64_t> received_splits;
        py::array output = TensorOrThrow(
            WithoutGil([&] { return Alltoall(input, splits, &received_splits); }));
        return py::make_tuple(output, received_splits);
      },
      py::arg("input"), py::arg("splits") = std::vector<int64_t>{},
      "Sends splits[i] first-dimension rows to rank i (empty: an equal split). Returns "
      "(rows received from rank 0 up, how many rows came from each rank).");
  module.def(
      "reducescatter",
      [](const TensorView& input, ReduceOp op) {
        RequireInit("reducescatter");
        return TensorOrThrow(WithoutGil([&] { return Reducescatter(input, op); }));
      },
      py::arg("input"), py::arg("op"),
      "Reduces across ranks; this rank keeps its share of the first dimension (the first "
      "rows % size ranks get one row more).");
  module.def(
      "barrier",
      [] {
        RequireInit("barrier");
        ThrowIfError(WithoutGil([] { return Barrier(); }));
      },
      "Returns once every rank has entered it.");
}

}  // namespace horovodd::python
