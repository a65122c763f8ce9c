// How the runtime's absl::Status reaches Python code: as the exceptions a
// Horovod user already catches.
//
//   hosts-updated interrupt (elastic::IsHostsUpdated)  HostsUpdatedInterrupt
//   UNAVAILABLE (lost peer), ABORTED (membership)      HorovodInternalError
//   INVALID_ARGUMENT (bad arguments, or ranks that     CollectiveArgumentError
//     disagree on shape, dtype, op or root)
//   anything else                                      RuntimeError
//
// HorovodInternalError and HostsUpdatedInterrupt derive from RuntimeError, as
// in Horovod. CollectiveArgumentError derives from both ValueError (what
// horovodd raised before) and RuntimeError (what Horovod raises on every rank
// for disagreeing ranks), so either `except` catches it. The message is the
// status message.
#pragma once

#include <pybind11/pybind11.h>

#include "absl/status/status.h"

namespace horovodd::python {

// Adds HorovodInternalError, HostsUpdatedInterrupt and CollectiveArgumentError
// to `module`.
void RegisterErrors(pybind11::module_& module);

// Throws the exception above for a failed status; nothing for OK. Call with
// the GIL held.
void ThrowIfError(const absl::Status& status);

// Throws ValueError ("horovodd has not been initialized: call hvd.init()
// before <what>") unless this process has joined its job.
void RequireInit(const char* what);

}  // namespace horovodd::python
