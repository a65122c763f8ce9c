#include "worker_runtime/gloo/sigpipe_block.h"

#include <pthread.h>

#include <ctime>

namespace horovodd::internal {
namespace {

sigset_t OnlySigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

}  // namespace

ScopedSigpipeBlock::ScopedSigpipeBlock() {
  const sigset_t sigpipe = OnlySigpipe();
  pthread_sigmask(SIG_BLOCK, &sigpipe, &previous_);
}

ScopedSigpipeBlock::~ScopedSigpipeBlock() {
  if (!sigismember(&previous_, SIGPIPE)) {
    // A write to a dead peer left SIGPIPE pending on this thread: consume it
    // so unblocking does not deliver it.
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      const sigset_t sigpipe = OnlySigpipe();
      const timespec no_wait{0, 0};
      sigtimedwait(&sigpipe, nullptr, &no_wait);
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace horovodd::internal
