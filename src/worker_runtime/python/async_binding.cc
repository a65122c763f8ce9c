// The asynchronous collectives: each returns an AsyncHandle at once; the
// engine thread runs the collective. Python (horovodd/ops.py) keeps the
// tensors alive in its own handle object until the request completes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "horovodd/async.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/python/tensor_args.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

Handle HandleOrThrow(absl::StatusOr<Handle> handle) {
  ThrowIfError(handle.status());
  return *std::move(handle);
}

}  // namespace

void BindAsync(py::module_& module) {
  py::class_<Handle>(module, "AsyncHandle",
                     "One asynchronous collective; completes once, successfully or not.")
      .def_property_readonly("name", &Handle::name)
      .def("poll", &Handle::Poll, "True once the collective has completed (never blocks).")
      .def(
          "wait", [](const Handle& handle) { ThrowIfError(WaitInterruptibly(handle)); },
          "Waits (without the GIL) until the collective completes; raises its error. "
          "Signals interrupt the wait (the request goes on).")
      .def(
          "take_output",
          [](const Handle& handle) {
            absl::StatusOr<Tensor> output = WithoutGil([&] { return handle.TakeOutput(); });
            ThrowIfError(output.status());
            return ToNumpy(*std::move(output));
          },
          "Waits, then the result of an allgather (once).");

  module.def(
      "allreduce_async_",
      [](const TensorView& inout, ReduceOp op, double prescale_factor, double postscale_factor,
         std::string name, int process_set_id) {
        RequireInit("allreduce_async_");
        const AllreduceOptions options =
            ReductionOptions(op, prescale_factor, postscale_factor, "", process_set_id);
        return HandleOrThrow(AllreduceAsync(std::move(name), inout, options));
      },
      py::arg("inout"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name"), py::kw_only(),
      py::arg("process_set_id") = 0,
      "Queues an in-place allreduce under `name`; keep the tensor alive until it completes.");
  module.def(
      "grouped_allreduce_async_",
      [](const std::vector<TensorView>& inouts, ReduceOp op, double prescale_factor,
         double postscale_factor, std::string name, int process_set_id) {
        RequireInit("grouped_allreduce_async_");
        const AllreduceOptions options =
            ReductionOptions(op, prescale_factor, postscale_factor, "", process_set_id);
        return HandleOrThrow(GroupedAllreduceAsync(std::move(name), inouts, options));
      },
      py::arg("inouts"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name"), py::kw_only(),
      py::arg("process_set_id") = 0,
      "Queues in-place allreduces of tensors of one dtype, fused together, as one request.");
  module.def(
      "broadcast_async_",
      [](const TensorView& inout, int root_rank, std::string name, int process_set_id) {
        RequireInit("broadcast_async_");
        return HandleOrThrow(BroadcastAsync(std::move(name), inout, root_rank, process_set_id));
      },
      py::arg("inout"), py::arg("root_rank"), py::arg("name"), py::kw_only(),
      py::arg("process_set_id") = 0, "Queues an in-place broadcast from root_rank under `name`.");
  module.def(
      "allgather_async",
      [](const TensorView& input, std::string name, int process_set_id) {
        RequireInit("allgather_async");
        return HandleOrThrow(AllgatherAsync(std::move(name), input, process_set_id));
      },
      py::arg("input"), py::arg("name"), py::kw_only(), py::arg("process_set_id") = 0,
      "Queues an allgather under `name`; the result comes from take_output().");
  module.def(
      "reducescatter_async",
      [](const TensorView& input, ReduceOp op, double prescale_factor, double postscale_factor,
         std::string name, int process_set_id) {
        RequireInit("reducescatter_async");
        const AllreduceOptions options =
            ReductionOptions(op, prescale_factor, postscale_factor, "", process_set_id);
        return HandleOrThrow(ReducescatterAsync(std::move(name), input, options));
      },
      py::arg("input"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name"), py::kw_only(),
      py::arg("process_set_id") = 0,
      "Queues a reducescatter under `name` (fused with others ready with it); this rank's "
      "share comes from take_output().");
}

}  // namespace horovodd::python
