#include "daemon/shim_relay/host_link.h"

#include "daemon/shim_relay/relay_core.h"

namespace horovodd::shim {

void HostLink::OnReadDone(bool ok) {
  if (ok) {
    core_->FromDaemon(this, in_);
    StartRead(&in_);
    return;
  }
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    reading_done_ = true;
    next_.Clear();
    release = !writing_;
  }
  if (release) RemoveHold();
}

void HostLink::OnDone(const grpc::Status& status) {
  core_->LinkDone(this, status);
  self_.reset();  // may delete this
}

}  // namespace horovodd::shim
