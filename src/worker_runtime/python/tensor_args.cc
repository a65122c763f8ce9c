#include "worker_runtime/python/tensor_args.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

constexpr DType kAllDTypes[] = {DType::kUInt8,   DType::kInt8,    DType::kInt16,    DType::kInt32,
                                DType::kInt64,   DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                DType::kFloat64, DType::kBool};

DType ParseDType(const std::string& name) {
  std::vector<std::string> known;
  for (DType dtype : kAllDTypes) {
    if (name == DTypeName(dtype)) return dtype;
    known.emplace_back(DTypeName(dtype));
  }
  throw py::value_error(absl::StrCat("horovodd does not support dtype '", name,
                                     "' (supported: ", absl::StrJoin(known, ", "), ")"));
}

Device ParseDevice(const std::string& name, int index) {
  if (name == "cpu") return Device{DeviceType::kCPU, 0};
  if (name == "cuda") return Device{DeviceType::kCUDA, index};
  throw py::value_error(
      absl::StrCat("horovodd does not support device '", name, "' (supported: cpu, cuda)"));
}

TensorView MakeTensorRef(std::uintptr_t data_ptr, const std::string& dtype,
                         std::vector<int64_t> shape, const std::string& device, int device_index) {
  TensorView view;
  view.data = reinterpret_cast<void*>(data_ptr);
  view.dtype = ParseDType(dtype);
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw py::value_error(
          absl::StrCat("tensor shape [", absl::StrJoin(shape, ", "), "] has a negative dimension"));
    }
  }
  view.shape = std::move(shape);
  view.device = ParseDevice(device, device_index);
  if (view.data == nullptr && view.numel() > 0) {
    throw py::value_error(
        absl::StrCat("tensor of ", view.numel(), " elements has a null data pointer"));
  }
  return view;
}

}  // namespace

void BindTensorRef(py::module_& module) {
  py::class_<TensorView>(module, "TensorRef",
                         "Memory a collective reads or writes in place: a contiguous, "
                         "row-major tensor owned by the caller (not copied).")
      .def(py::init(&MakeTensorRef), py::arg("data_ptr"), py::arg("dtype"), py::arg("shape"),
           py::arg("device") = "cpu", py::arg("device_index") = 0)
      .def_property_readonly("dtype", [](const TensorView& v) { return DTypeName(v.dtype); })
      .def_property_readonly("shape", [](const TensorView& v) { return v.shape; })
      .def_property_readonly("numel", &TensorView::numel);
}

py::array ToNumpy(Tensor tensor) {
  // numpy has no bfloat16: its raw bits travel as int16 (see tensor_args.h).
  const py::dtype dtype(tensor.dtype() == DType::kBFloat16 ? "int16" : DTypeName(tensor.dtype()));
  const std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  if (tensor.nbytes() == 0) return py::array(dtype, shape);
  auto owned = std::make_unique<Tensor>(std::move(tensor));
  void* data = owned->data();
  // The capsule owns the Tensor from here on; numpy frees it with the array.
  py::capsule owner(owned.get(), [](void* p) { delete static_cast<Tensor*>(p); });
  owned.release();
  return py::array(dtype, shape, data, owner);
}

AllreduceOptions ReductionOptions(ReduceOp op, double prescale_factor, double postscale_factor,
                                  std::string name, int process_set_id) {
  AllreduceOptions options;
  options.op = op;
  options.prescale_factor = prescale_factor;
  options.postscale_factor = postscale_factor;
  options.name = std::move(name);
  options.process_set_id = process_set_id;
  return options;
}

}  // namespace horovodd::python
