// The synchronous collectives on caller-owned memory. In-place ones end in
// `_`; the rest return numpy arrays that own their results. Each starts its
// request on the engine and waits for it in slices (AwaitRequest), so signal
// handlers run while it is blocked on a peer.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/python/tensor_args.h"
#include "worker_runtime/runtime/engine_api.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

constexpr char kKeepDoc[] =
    " `keep` owns the tensors' memory (the TensorRefs are not owners): if a signal "
    "interrupts the wait, it stays referenced until the collective completes.";

internal::Runtime& RuntimeOrThrow(const char* operation) {
  RequireInit(operation);
  absl::StatusOr<internal::Runtime*> runtime = internal::RuntimeFor(operation);
  ThrowIfError(runtime.status());
  return **runtime;
}

// Waits for a started request (AwaitRequest: signals interrupt the wait) and
// raises its error.
void Await(absl::StatusOr<Handle> handle, py::object keep) {
  ThrowIfError(handle.status());
  ThrowIfError(AwaitRequest(*handle, std::move(keep)));
}

// Await, then the request's result as a numpy array.
py::array AwaitOutput(absl::StatusOr<Handle> handle, py::object keep) {
  Await(handle, std::move(keep));
  absl::StatusOr<Tensor> output = handle->TakeOutput();  // done: no wait
  ThrowIfError(output.status());
  return ToNumpy(*std::move(output));
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
         std::string name, int process_set_id, py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("allreduce");
        const AllreduceOptions options = ReductionOptions(op, prescale_factor, postscale_factor,
                                                          std::move(name), process_set_id);
        Await(internal::StartAllreduce(runtime, inout, options), std::move(keep));
      },
      py::arg("inout"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name") = "", py::kw_only(),
      py::arg("process_set_id") = 0, py::arg("keep") = py::none(),
      (std::string("In place: every rank ends with op over all ranks' tensors (each multiplied "
                   "by prescale_factor first), multiplied by postscale_factor. Every rank must "
                   "pass the same dtype and element count.") +
       kKeepDoc)
          .c_str());
  module.def(
      "allgather",
      [](const TensorView& input, int process_set_id, py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("allgather");
        return AwaitOutput(internal::StartAllgather(runtime, input, process_set_id),
                           std::move(keep));
      },
      py::arg("input"), py::kw_only(), py::arg("process_set_id") = 0, py::arg("keep") = py::none(),
      (std::string("All ranks' tensors concatenated along the first dimension, in rank "
                   "order.") +
       kKeepDoc)
          .c_str());
  module.def(
      "broadcast_",
      [](const TensorView& inout, int root_rank, int process_set_id, py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("broadcast");
        Await(internal::StartBroadcast(runtime, inout, root_rank, process_set_id), std::move(keep));
      },
      py::arg("inout"), py::arg("root_rank"), py::kw_only(), py::arg("process_set_id") = 0,
      py::arg("keep") = py::none(),
      (std::string("In place: every rank ends with root_rank's tensor (root_rank is a rank of "
                   "the job, a member of the process set).") +
       kKeepDoc)
          .c_str());
  module.def(
      "alltoall",
      [](const TensorView& input, std::vector<int64_t> splits, int process_set_id,
         py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("alltoall");
        auto received = std::make_shared<std::vector<int64_t>>();
        py::array output = AwaitOutput(
            internal::StartAlltoall(runtime, input, std::move(splits), received, process_set_id),
            std::move(keep));
        return py::make_tuple(output, *received);
      },
      py::arg("input"), py::arg("splits") = std::vector<int64_t>{}, py::kw_only(),
      py::arg("process_set_id") = 0, py::arg("keep") = py::none(),
      (std::string("Sends splits[i] first-dimension rows to rank i (empty: an equal split). "
                   "Returns (rows received from rank 0 up, how many rows came from each "
                   "rank).") +
       kKeepDoc)
          .c_str());
  module.def(
      "reducescatter",
      [](const TensorView& input, ReduceOp op, double prescale_factor, double postscale_factor,
         std::string name, int process_set_id, py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("reducescatter");
        const AllreduceOptions options = ReductionOptions(op, prescale_factor, postscale_factor,
                                                          std::move(name), process_set_id);
        return AwaitOutput(internal::StartReducescatter(runtime, input, options), std::move(keep));
      },
      py::arg("input"), py::arg("op"), py::arg("prescale_factor") = 1.0,
      py::arg("postscale_factor") = 1.0, py::arg("name") = "", py::kw_only(),
      py::arg("process_set_id") = 0, py::arg("keep") = py::none(),
      (std::string("Reduces across ranks (each tensor multiplied by prescale_factor first, the "
                   "result by postscale_factor); this rank keeps its share of the first "
                   "dimension (the first rows % size ranks get one row more).") +
       kKeepDoc)
          .c_str());
  module.def(
      "adasum_",
      [](const TensorView& inout, double prescale_factor, double postscale_factor,
         int process_set_id, py::object keep) {
        internal::Runtime& runtime = RuntimeOrThrow("adasum");
        Await(internal::StartAdasum(runtime, inout, prescale_factor, postscale_factor,
                                    process_set_id),
              std::move(keep));
      },
      py::arg("inout"), py::arg("prescale_factor") = 1.0, py::arg("postscale_factor") = 1.0,
      py::kw_only(), py::arg("process_set_id") = 0, py::arg("keep") = py::none(),
      (std::string("In place: every rank ends with the Adasum of all ranks' tensors (each "
                   "multiplied by prescale_factor first), multiplied by postscale_factor: "
                   "Horovod's recursive vector-halving, distance-doubling algorithm. CPU "
                   "float16, bfloat16, float32 and float64 tensors; a power-of-two set.") +
       kKeepDoc)
          .c_str());
  module.def(
      "barrier",
      [](int process_set_id) {
        internal::Runtime& runtime = RuntimeOrThrow("barrier");
        Await(internal::StartBarrier(runtime, process_set_id), py::none());
      },
      py::kw_only(), py::arg("process_set_id") = 0,
      "Returns once every rank (of the process set) has entered it. Signals interrupt the "
      "wait.");
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
        internal::Runtime& runtime = RuntimeOrThrow("join");
        py::array last = AwaitOutput(internal::EnqueueJoin(runtime), py::none());
        return static_cast<int>(*static_cast<const int32_t*>(last.data()));
      },
      "Horovod's join: this rank is out of data. Until every rank has joined, the others' "
      "allreduces go on with this rank contributing zeros (an average divides by the ranks "
      "that contributed). Returns the last rank to join.");
}

}  // namespace horovodd::python
