#include "worker_runtime/daemon_client/process_exit.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::internal {
namespace {

ABSL_CONST_INIT absl::Mutex g_hook_mu(absl::kConstInit);
ProcessExitHook* g_hook ABSL_GUARDED_BY(g_hook_mu) = nullptr;  // null: the default

void DefaultExit(ExitReason reason) {
  std::fflush(stderr);
  switch (reason) {
    case ExitReason::kRemoved:
      std::exit(0);
    case ExitReason::kDaemonLost:
      _exit(1);
  }
}

}  // namespace

ProcessExitHook SetProcessExitHook(ProcessExitHook hook) {
  absl::MutexLock lock(&g_hook_mu);
  ProcessExitHook previous = g_hook != nullptr ? std::move(*g_hook) : ProcessExitHook();
  delete g_hook;
  g_hook = hook ? new ProcessExitHook(std::move(hook)) : nullptr;
  return previous;
}

void ExitProcess(ExitReason reason) {
  ProcessExitHook hook;
  {
    absl::MutexLock lock(&g_hook_mu);
    if (g_hook != nullptr) hook = *g_hook;
  }
  // Run outside the lock: a hook may install another.
  if (hook) {
    hook(reason);
  } else {
    DefaultExit(reason);
  }
}

}  // namespace horovodd::internal
