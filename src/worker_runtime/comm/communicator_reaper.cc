#include "worker_runtime/comm/communicator_reaper.h"

#include <utility>

namespace horovodd::internal {

CommunicatorReaper::CommunicatorReaper() : thread_([this] { Run(); }) {}

CommunicatorReaper::~CommunicatorReaper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  thread_.join();
}

void CommunicatorReaper::Retire(std::shared_ptr<Communicator> communicator) {
  if (communicator == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    retired_.push_back(std::move(communicator));
  }
  wake_.Signal();
}

void CommunicatorReaper::Run() {
  mu_.Lock();
  while (true) {
    while (!stopping_ && retired_.empty()) wake_.Wait(&mu_);
    if (retired_.empty()) break;  // stopping, nothing left
    std::shared_ptr<Communicator> communicator = std::move(retired_.front());
    retired_.pop_front();
    mu_.Unlock();
    communicator.reset();  // the teardown, outside the lock
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace horovodd::internal
