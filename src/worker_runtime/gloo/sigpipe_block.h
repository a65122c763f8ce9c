// Gloo writes to its sockets with writev(2), which also raises SIGPIPE --
// fatal by default -- when the peer has gone; Gloo handles the EPIPE that
// comes with it but leaves the signal to the program. Blocking SIGPIPE in
// the threads that write (ours during a collective; Gloo's I/O thread, which
// inherits the mask of the thread that creates its device) leaves just the
// EPIPE, without changing the process-wide disposition (which child
// processes would inherit).
#pragma once

#include <signal.h>

namespace horovodd::internal {

class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock();   // blocks SIGPIPE in this thread
  ~ScopedSigpipeBlock();  // discards a SIGPIPE raised meanwhile, restores the mask
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace horovodd::internal
