// What one AttachHost stream has to write to its host, batched: every
// message queued for any of the host's workers while a write is in flight
// goes out together in the next one, and messages held (Hold: the driver
// tells the whole generation within a ChannelBatch) go together when
// flushed. A generation announced to a host's eight workers thus costs the
// daemon one write, not eight, and a heartbeat round's answer is one empty
// message (none while a write is in flight: that one already tells the
// host the daemon is there).
//
// Not thread-safe: the stream calls it under its own mutex. A returned
// batch stays put until the next WriteDone.
#pragma once

#include <cstdint>

#include "horovodd.pb.h"

namespace horovodd::daemon {

class HostOutbox {
 public:
  // The interval every batch announces (0: none).
  void set_heartbeat_interval_ms(int64_t ms) { heartbeat_interval_ms_ = ms; }

  // Queues `message` for worker `worker_id`. Returns the batch to write now
  // when no write is in flight (the caller starts it), else nullptr: the
  // message goes with the next batch.
  const v1::HostDaemonMessage* Add(int64_t worker_id, v1::DaemonMessage message);
  // Keeps `message` for worker `worker_id` until Flush: a write finishing
  // meanwhile does not take it, so what is held between two flushes goes out
  // in one batch.
  void Hold(int64_t worker_id, v1::DaemonMessage message);
  // Queues what is held. Returns the batch to write now, when something is
  // queued and no write is in flight (the caller starts it), else nullptr.
  const v1::HostDaemonMessage* Flush();
  // An empty batch to answer a heartbeat round, unless a write is in flight
  // or pending (then nullptr).
  const v1::HostDaemonMessage* Echo();
  // The write in flight is done: the next batch (everything queued since),
  // or nullptr when nothing waits (then no write is in flight).
  const v1::HostDaemonMessage* WriteDone();
  // The stream broke or ends: nothing is queued or written any more.
  void Close();

  bool writing() const { return writing_; }
  bool closed() const { return closed_; }
  // Messages queued or held for the next batches.
  int queued() const { return next_.workers_size() + held_.workers_size(); }

 private:
  const v1::HostDaemonMessage* StartNext();

  int64_t heartbeat_interval_ms_ = 0;
  v1::HostDaemonMessage in_flight_;
  v1::HostDaemonMessage next_;
  v1::HostDaemonMessage held_;  // only `workers` is used
  bool writing_ = false;
  bool closed_ = false;
};

}  // namespace horovodd::daemon
