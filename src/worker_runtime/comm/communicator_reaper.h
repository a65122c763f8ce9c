// Destroys the communicators a worker leaves behind, on a thread of its own.
//
// Tearing down a dead ring closes its pairs and stops its device, and each
// of those waits for the device's loop thread to come round (and a host's
// shared memory is unmapped, its watch thread joined). On a reset the worker
// that drops its communicators has better things to do meanwhile -- ask for
// the next generation and connect its ring -- and with every rank of a job
// tearing down at once on a busy machine, doing it inline costs tens of
// milliseconds on the way from a lost peer to resumed training.
#pragma once

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker_runtime/comm/communicator.h"

namespace horovodd::internal {

class CommunicatorReaper {
 public:
  CommunicatorReaper();
  // Destroys what is still queued, then stops.
  ~CommunicatorReaper();
  CommunicatorReaper(const CommunicatorReaper&) = delete;
  CommunicatorReaper& operator=(const CommunicatorReaper&) = delete;

  // Drops `communicator` on the reaper's thread (destroyed there unless
  // someone else still holds it). Null is ignored.
  void Retire(std::shared_ptr<Communicator> communicator) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  absl::CondVar wake_;  // something was retired, or the reaper stops
  std::deque<std::shared_ptr<Communicator>> retired_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace horovodd::internal
