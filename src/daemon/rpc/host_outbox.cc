#include "daemon/rpc/host_outbox.h"

#include <utility>

namespace horovodd::daemon {

const v1::HostDaemonMessage* HostOutbox::Add(int64_t worker_id, v1::DaemonMessage message) {
  if (closed_) return nullptr;
  v1::RelayedDaemonMessage* relayed = next_.add_workers();
  relayed->set_worker_id(worker_id);
  *relayed->mutable_message() = std::move(message);
  return writing_ ? nullptr : StartNext();
}

void HostOutbox::Hold(int64_t worker_id, v1::DaemonMessage message) {
  if (closed_) return;
  v1::RelayedDaemonMessage* relayed = held_.add_workers();
  relayed->set_worker_id(worker_id);
  *relayed->mutable_message() = std::move(message);
}

const v1::HostDaemonMessage* HostOutbox::Flush() {
  if (closed_) return nullptr;
  for (v1::RelayedDaemonMessage& relayed : *held_.mutable_workers()) {
    *next_.add_workers() = std::move(relayed);
  }
  held_.Clear();
  if (writing_ || next_.workers_size() == 0) return nullptr;
  return StartNext();
}

const v1::HostDaemonMessage* HostOutbox::Echo() {
  if (closed_ || writing_) return nullptr;
  return StartNext();
}

const v1::HostDaemonMessage* HostOutbox::WriteDone() {
  writing_ = false;
  if (closed_ || next_.workers_size() == 0) return nullptr;
  return StartNext();
}

void HostOutbox::Close() {
  closed_ = true;
  next_.Clear();
  held_.Clear();
}

const v1::HostDaemonMessage* HostOutbox::StartNext() {
  in_flight_.Clear();
  in_flight_.Swap(&next_);
  in_flight_.set_heartbeat_interval_ms(heartbeat_interval_ms_);
  writing_ = true;
  return &in_flight_;
}

}  // namespace horovodd::daemon
