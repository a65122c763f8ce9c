// The one way horovodd's library code ends the process. Two things may end a
// worker behind its training code's back, both by design:
//   kRemoved     the daemon removed this worker from the job (status 0;
//                std::exit, after horovodd::Shutdown() stopped our threads);
//   kDaemonLost  the daemon was out of reach past its grace period
//                (status 1; _exit from the heartbeat thread, since at-exit
//                handlers would race the threads still running), so a worker
//                never outlives its daemon.
// Nothing else in the runtime calls exit, _exit or abort (HVDD_CHECK aside).
//
// Tests replace the hook to see the exit instead of dying; a hook that
// returns makes the caller carry on as documented where it calls
// ExitProcess.
#pragma once

#include <functional>

namespace horovodd::internal {

enum class ExitReason { kRemoved, kDaemonLost };

using ProcessExitHook = std::function<void(ExitReason reason)>;

// Installs `hook` (null: the default, which exits as above) and returns the
// one it replaces. Thread-safe.
ProcessExitHook SetProcessExitHook(ProcessExitHook hook);

// Runs the installed hook. With the default hook it does not return.
void ExitProcess(ExitReason reason);

}  // namespace horovodd::internal
