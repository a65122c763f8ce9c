#include "worker_runtime/python/status_errors.h"

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

// The exception types, created once by RegisterErrors. Deliberately never
// released: C++ static destructors run after the interpreter is gone.
PyObject* g_internal_error = nullptr;
PyObject* g_hosts_updated = nullptr;
PyObject* g_argument_error = nullptr;

// `bases`: one exception type, or a tuple of them (a new reference is taken
// by PyErr_NewExceptionWithDoc).
PyObject* NewErrorType(py::module_& module, const char* name, const char* doc, PyObject* bases) {
  const std::string qualified = absl::StrCat(PyModule_GetName(module.ptr()), ".", name);
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  module.add_object(name, py::handle(type));
  return type;
}

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

}  // namespace

void RegisterErrors(py::module_& module) {
  g_internal_error = NewErrorType(
      module, "HorovodInternalError",
      "A collective failed because a peer was lost or the job's membership changed under "
      "it. Inside horovodd.elastic.run the state is restored to its last commit and "
      "training resumes in the next generation.",
      PyExc_RuntimeError);
  g_hosts_updated = NewErrorType(
      module, "HostsUpdatedInterrupt",
      "Raised by State.commit()/check_host_updates() on every rank at the same step when "
      "the job's membership changed. Inside horovodd.elastic.run the state is kept and "
      "training resumes in the next generation.",
      PyExc_RuntimeError);
  // Both a ValueError (the arguments are wrong) and a RuntimeError (what
  // Horovod raises, on every rank, when ranks disagree on a collective).
  py::tuple argument_bases =
      py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_RuntimeError));
  g_argument_error = NewErrorType(
      module, "CollectiveArgumentError",
      "A collective's arguments are invalid, or ranks passed different shapes, dtypes, ops "
      "or roots for it (raised on every rank). Both a ValueError and a RuntimeError.",
      argument_bases.ptr());
}

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  if (elastic::IsHostsUpdated(status)) Raise(g_hosts_updated, message);
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
      Raise(g_internal_error, message);
    case absl::StatusCode::kInvalidArgument:
      Raise(g_argument_error, message);
    default:
      throw std::runtime_error(message);
  }
}

void RequireInit(const char* what) {
  if (!IsInitialized()) {
    throw py::value_error(
        absl::StrCat("horovodd has not been initialized: call hvd.init() before ", what));
  }
}

}  // namespace horovodd::python
