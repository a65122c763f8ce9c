// What horovodd/elastic.py needs from the runtime beyond collectives: the
// host-update check, and commit and failure reports to the daemon.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/python/bindings.h"
#include "worker_runtime/python/blocking_call.h"
#include "worker_runtime/python/status_errors.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::python {
namespace {

namespace py = pybind11;

internal::Runtime& InitializedRuntime(const char* what) {
  RequireInit(what);
  return *internal::CurrentRuntime();
}

// Ranks hear of a new generation at different moments; one allreduce(max)
// of the newest each has heard of makes all of them see the change at this
// same call.
absl::Status CheckHostUpdates(internal::Runtime& runtime) {
  std::vector<int64_t> newest = {runtime.newest_generation()};
  AllreduceOptions options;
  options.op = ReduceOp::kMax;
  options.name = "elastic.check_host_updates";
  HVDD_RETURN_IF_ERROR(Allreduce(ViewOf(newest), options));
  if (newest[0] > runtime.generation()) {
    return elastic::HostsUpdatedError(runtime.generation(), newest[0]);
  }
  return absl::OkStatus();
}

}  // namespace

void BindElastic(py::module_& module) {
  module.def(
      "newest_generation",
      [] { return InitializedRuntime("newest_generation").newest_generation(); },
      "The newest generation the daemon has announced to this worker.");
  module.def(
      "check_host_updates",
      [] {
        internal::Runtime& runtime = InitializedRuntime("check_host_updates");
        ThrowIfError(WithoutGil([&] { return CheckHostUpdates(runtime); }));
      },
      "Raises HostsUpdatedInterrupt on every rank when any rank has heard of a newer "
      "generation (one tiny collective: call it at the same step on every rank).");
  module.def(
      "report_commit",
      [](int64_t commits) { InitializedRuntime("report_commit").ReportCommit(commits); },
      py::arg("commits"),
      "Tells the daemon this worker has committed `commits` times (without waiting).");
  module.def(
      "report_failure",
      [](const std::string& message) {
        InitializedRuntime("report_failure").ReportFailure(absl::UnavailableError(message));
      },
      py::arg("message"),
      "Tells the daemon a collective failed (without waiting); nothing when the daemon "
      "already announced a newer generation.");
}

}  // namespace horovodd::python
