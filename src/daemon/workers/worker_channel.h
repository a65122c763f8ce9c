// The daemon's end of one worker's Attach stream, as the job driver sees it:
// a way to push notifications. Implemented by the gRPC adapter; the driver
// never sees gRPC types.
#pragma once

#include "horovodd.pb.h"

namespace horovodd::daemon {

class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Queues a message to the worker; never blocks. Thread-safe.
  virtual void Send(const v1::DaemonMessage& message) = 0;
};

}  // namespace horovodd::daemon
