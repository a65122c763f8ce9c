#include "worker_runtime/python/blocking_call.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace horovodd::python {
namespace {

namespace py = pybind11;

// Requests whose wait a signal ended, with what owns their memory. Only
// touched with the GIL held. Never destroyed: at exit the GIL is not held,
// and a Python reference may only be dropped with it.
std::vector<std::pair<Handle, py::object>>& Interrupted() {
  static auto* const interrupted = new std::vector<std::pair<Handle, py::object>>();
  return *interrupted;
}

void ForgetCompleted() {
  std::vector<std::pair<Handle, py::object>>& interrupted = Interrupted();
  interrupted.erase(std::remove_if(interrupted.begin(), interrupted.end(),
                                   [](const auto& entry) { return entry.first.Poll(); }),
                    interrupted.end());
}

}  // namespace

absl::Status AwaitRequest(const Handle& handle, py::object keep) {
  ForgetCompleted();
  try {
    return WaitInterruptibly(handle);
  } catch (py::error_already_set&) {
    if (!handle.Poll()) Interrupted().emplace_back(handle, std::move(keep));
    throw;
  }
}

}  // namespace horovodd::python
