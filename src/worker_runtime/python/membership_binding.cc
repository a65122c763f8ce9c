// This process's membership in its job: joining, leaving, its place in the
// current generation, and moving to the next generation.
#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

// One of Rank(), Size(), ... after checking that there is a generation.
template <typename Field>
void DefField(py::module_& module, const char* name, Field field, const char* doc) {
  module.def(
      name,
      [name, field] {
        RequireInit(name);
        return field();
      },
      doc);
}

}  // namespace

void BindMembership(py::module_& module) {
  module.def(
      "init", [] { ThrowIfError(WithoutGil([] { return Init(); })); },
      "Joins the job that launched this process (horovodrun sets the environment) and "
      "builds the rings. Idempotent. Exits the process with status 0 when the daemon no "
      "longer wants this worker.");
  module.def(
      "shutdown",
      [] {
        py::gil_scoped_release release;
        Shutdown();
      },
      "Leaves the rings and closes the daemon connection. Idempotent.");
  module.def("is_initialized", &IsInitialized,
             "Whether init() has been called (and no shutdown()).");

  DefField(module, "rank", &Rank, "This worker's rank in the current generation.");
  DefField(module, "size", &Size, "Workers in the current generation.");
  DefField(module, "local_rank", &LocalRank, "This worker's rank among those on its host.");
  DefField(module, "local_size", &LocalSize, "Workers of the current generation on this host.");
  DefField(module, "cross_rank", &CrossRank,
           "Index of this host among the hosts that have this local rank.");
  DefField(module, "cross_size", &CrossSize, "Hosts that have this worker's local rank.");
  DefField(module, "generation", &Generation,
           "The current generation: it changes with every change of membership.");

  module.def(
      "rejoin",
      [] {
        RequireInit("rejoin");
        ThrowIfError(WithoutGil([] { return internal::RejoinCurrentRuntime(); }));
      },
      "Re-rendezvouses for the job's next generation and rebuilds the rings. Exits the "
      "process with status 0 when the daemon removed this worker.");
}

}  // namespace horovodd::python
