// Runs a call into the runtime that may wait on peers or on the daemon.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <utility>

namespace horovodd::python {

// Runs `call` with the GIL released, so the process's other Python threads
// (data loaders, monitors) run while this one waits. Every such wait is
// bounded (collectives by the ring timeout, rendezvous by the daemon's
// elastic timeout), so a Ctrl-C is never held back for ever: right after the
// call returns, a signal that arrived meanwhile raises its exception
// (KeyboardInterrupt for SIGINT) instead of the call's own result or error.
template <typename Call>
auto WithoutGil(Call&& call) -> decltype(call()) {
  auto result = [&] {
    pybind11::gil_scoped_release release;
    return std::forward<Call>(call)();
  }();
  if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  return result;
}

}  // namespace horovodd::python
