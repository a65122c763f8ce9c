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
         std::string name, int process_set_id) {
        RequireInit("allreduce");
        AllreduceOptions options;
        options.op = op;
        options.prescale_factor = prescale_factor;
        options.postscale_factor = postscale_factor;
        options.name = std::move(name);
        options.process_set_id = process_set_id;
        ThrowIfError(WithoutGil([&] { return Allreduce(inout, options); }));
      },
      py::arg("inout"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name") = "", py::kw_only(),
      py::arg("process_set_id") = 0,
      "In place: every rank ends with op over all ranks' tensors (each multiplied by "
      "prescale_factor first), multiplied by postscale_factor. Every rank must pass the "
      "same dtype and element count.");
  module.def(
      "allgather",
      [](const TensorView& input, int process_set_id) {
        RequireInit("allgather");
        return TensorOrThrow(WithoutGil([&] { return Allgather(input, process_set_id); }));
      },
      py::arg("input"), py::kw_only(), py::arg("process_set_id") = 0,
      "All ranks' tensors concatenated along the first dimension, in rank order.");
  module.def(
      "broadcast_",
      [](const TensorView& inout, int root_rank, int process_set_id) {
        RequireInit("broadcast");
        ThrowIfError(WithoutGil([&] { return Broadcast(inout, root_rank, process_set_id); }));
      },
      py::arg("inout"), py::arg("root_rank"), py::kw_only(), py::arg("process_set_id") = 0,
      "In place: every rank ends with root_rank's tensor (root_rank is a rank of the job, "
      "a member of the process set).");
  module.def(
      "alltoall",
      [](const TensorView& input, std::vector<int64_t> splits, int process_set_id) {
        RequireInit("alltoall");
        std::vector<int64_t> received_splits;
        py::array output = TensorOrThrow(WithoutGil(
            [&] { return Alltoall(input, splits, &received_splits, process_set_id); }));
        return py::make_tuple(output, received_splits);
      },
      py::arg("input"), py::arg("splits") = std::vector<int64_t>{}, py::kw_only(),
      py::arg("process_set_id") = 0,
      "Sends splits[i] first-dimension rows to rank i (empty: an equal split). Returns "
      "(rows received from rank 0 up, how many rows came from each rank).");
  module.def(
      "reducescatter",
      [](const TensorView& input, ReduceOp op, int process_set_id) {
        RequireInit("reducescatter");
        return TensorOrThrow(
            WithoutGil([&] { return Reducescatter(input, op, process_set_id); }));
      },
      py::arg("input"), py::arg("op"), py::kw_only(), py::arg("process_set_id") = 0,
      "Reduces across ranks; this rank keeps its share of the first dimension (the first "
      "rows % size ranks get one row more).");
  module.def(
      "barrier",
      [](int process_set_id) {
        RequireInit("barrier");
        ThrowIfError(WithoutGil([&] { return Barrier(process_set_id); }));
      },
      py::kw_only(), py::arg("process_set_id") = 0,
      "Returns once every rank (of the process set) has entered it.");
  module.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        RequireInit("start_timeline");
        ThrowIfError(StartTimeline(path, mark_cycles));
      },
      py::arg("path"), py::arg("mark_cycles") = false,
      "Rank 0 writes a Chrome trace event file of every collective from now on (Horovod's "
      "timeline); other ranks do nothing.");
  module.def(
      "stop_timeline", [] { ThrowIfError(StopTimeline()); },
      "Ends the timeline and completes its file.");
  module.def(
      "join",
      [] {
        RequireInit("join");
        absl::StatusOr<int> last = WithoutGil([] { return Join(); });
        ThrowIfError(last.status());
        return *last;
      },
      "Horovod's join: this rank is out of data. Until every rank has joined, the others' "
      "allreduces go on with this rank contributing zeros (an average divides by the ranks "
      "that contributed). Returns the last rank to join.");
}

}  // namespace horovodd::python
