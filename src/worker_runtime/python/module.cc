// _horovodd: the C++ half of the horovodd Python package. Python code uses it
// through horovodd/ (horovodd.torch, horovodd.elastic), never directly.
#include <pybind11/pybind11.h>

#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/python/tensor_args.h"

PYBIND11_MODULE(_horovodd, module) {
  module.doc() =
      "horovodd's worker runtime for Python: membership, collectives over caller-owned "
      "memory, and elastic primitives. Use it through the horovodd package.";
  horovodd::python::RegisterErrors(module);
  horovodd::python::BindTensorRef(module);
  horovodd::python::BindMembership(module);
  horovodd::python::BindCollectives(module);
  horovodd::python::BindAsync(module);
  horovodd::python::BindProcessSets(module);
  horovodd::python::BindElastic(module);
}
