// Runs a call into the runtime that may wait on peers or on the daemon.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "horovodd/async.h"

namespace horovodd::python {

// Runs `call` with the GIL released, so the process's other Python threads
// (data loaders, monitors) run while this one waits. Every such wait is
// bounded (rendezvous by the daemon's elastic timeout), so a Ctrl-C is never
// held back for ever: right after the call returns, a signal that arrived
// meanwhile raises its exception (KeyboardInterrupt for SIGINT) instead of
// the call's own result or error. `call` must run to its end here: it uses
// memory of the caller's frame. Collectives wait with AwaitRequest instead.
template <typename Call>
auto WithoutGil(Call&& call) -> decltype(call()) {
  auto result = [&] {
    pybind11::gil_scoped_release release;
    return std::forward<Call>(call)();
  }();
  if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  return result;
}

// How long one slice of WaitInterruptibly waits without the GIL: short
// enough that Ctrl-C feels immediate, long enough to cost nothing.
inline constexpr absl::Duration kSignalCheckInterval = absl::Milliseconds(50);

// Waits for an asynchronous request without the GIL, in slices; between
// slices the interpreter runs its signal handlers (PyErr_CheckSignals), so
// Ctrl-C or SIGTERM interrupt a request blocked on a peer at once: the
// handler's exception (KeyboardInterrupt) is thrown and the request goes on
// (its memory is the Python handle's, kept alive by horovodd/ops.py until the
// request completes). Returns the request's status.
inline absl::Status WaitInterruptibly(const Handle& handle) {
  while (true) {
    std::optional<absl::Status> status;
    {
      pybind11::gil_scoped_release release;
      status = handle.WaitFor(kSignalCheckInterval);
    }
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    if (status.has_value()) return *status;
  }
}

// Waits for a synchronous collective's request (collectives_binding.cc) as
// WaitInterruptibly does, so Ctrl-C and SIGTERM handlers run while it is
// blocked on a peer. When a handler's exception ends the wait early, the
// request runs on (it completes, or fails at the next reset) in memory that
// `keep` owns (the tensors, or their contiguous copies): `keep` stays
// referenced until the request completes, so the engine never writes into
// memory Python has freed. Returns the request's status. Call with the GIL.
absl::Status AwaitRequest(const Handle& handle, pybind11::object keep);

}  // namespace horovodd::python
