// Destroys the rings a worker leaves behind, on a thread of its own.
//
// Tearing down a dead ring closes its pairs and stops its device, and each
// of those waits for the device's loop thread to come round. On a reset the
// worker that drops its ring has better things to do meanwhile -- ask for the
// next generation and connect its ring -- and with every rank of a 16-rank
// job tearing down at once on a busy machine, doing it inline cost tens of
// milliseconds on the way from a lost peer to resumed training.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <gloo/context.h>

namespace horovodd::internal {

class RingReaper {
 public:
  RingReaper();
  // Destroys what is still queued, then stops.
  ~RingReaper();
  RingReaper(const RingReaper&) = delete;
  RingReaper& operator=(const RingReaper&) = delete;

  // Drops `ring` on the reaper's thread (destroyed there unless someone
  // else still holds it). Null is ignored.
  void Retire(std::shared_ptr<gloo::Context> ring);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<gloo::Context>> retired_;  // guarded by mu_
  bool stopping_ = false;                               // guarded by mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace horovodd::internal
