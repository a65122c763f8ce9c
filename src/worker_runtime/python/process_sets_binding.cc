// Process sets (horovodd/process_sets.h): add, remove, and their ranks. The
// collectives take them as `process_set_id` (collectives_binding.cc,
// async_binding.cc).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>
#include <vector>

#include "horovodd/process_sets.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"

namespace horovodd::python {

namespace py = pybind11;

void BindProcessSets(py::module_& module) {
  module.def(
      "add_process_set",
      [](std::vector<int> ranks, bool at_init) {
        RequireInit("add_process_set");
        absl::StatusOr<int> id =
            WithoutGil([&] { return AddProcessSet(std::move(ranks), at_init); });
        ThrowIfError(id.status());
        return *id;
      },
      py::arg("ranks"), py::arg("at_init") = false,
      "Collective over every rank: adds a process set of these ranks and returns its id. "
      "Needs HOROVOD_DYNAMIC_PROCESS_SETS=1 unless at_init (the sets init() was given).");
  module.def(
      "remove_process_set",
      [](int process_set_id) {
        RequireInit("remove_process_set");
        ThrowIfError(WithoutGil([&] { return RemoveProcessSet(process_set_id); }));
      },
      py::arg("process_set_id"), "Collective over every rank: removes the process set.");
  module.def(
      "process_set_ranks",
      [](int process_set_id) {
        RequireInit("process_set_ranks");
        absl::StatusOr<std::vector<int>> ranks = ProcessSetRanks(process_set_id);
        ThrowIfError(ranks.status());
        return *ranks;
      },
      py::arg("process_set_id"), "The process set's ranks, ascending (0: every rank).");
  module.def(
      "process_set_ids", [] { return ProcessSetIds(); },
      "The ids of the process sets there are, the global set (0) first.");
}

}  // namespace horovodd::python
