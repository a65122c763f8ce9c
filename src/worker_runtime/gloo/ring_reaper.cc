#include "worker_runtime/gloo/ring_reaper.h"

#include <utility>

namespace horovodd::internal {

RingReaper::RingReaper() : thread_([this] { Run(); }) {}

RingReaper::~RingReaper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void RingReaper::Retire(std::shared_ptr<gloo::Context> ring) {
  if (ring == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retired_.push_back(std::move(ring));
  }
  wake_.notify_all();
}

void RingReaper::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !retired_.empty(); });
    if (retired_.empty()) return;  // stopping, nothing left
    std::shared_ptr<gloo::Context> ring = std::move(retired_.front());
    retired_.pop_front();
    lock.unlock();
    ring.reset();
    lock.lock();
  }
}

}  // namespace horovodd::internal
