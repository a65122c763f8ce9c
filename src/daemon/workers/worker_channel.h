// The daemon's end of one worker's Attach stream, as the job driver sees it:
// a way to push notifications. Implemented by the gRPC adapter; the driver
// never sees gRPC types.
#pragma once

#include <functional>
#include <vector>

#include "horovodd.pb.h"

namespace horovodd::daemon {

class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Queues a message to the worker; never blocks. Thread-safe.
  virtual void Send(const v1::DaemonMessage& message) = 0;
};

// While one is open on a thread, the channels that share a stream (a host's
// AttachHost stream carries all its workers') hold what that thread sends
// them, and each such stream writes it all at once when the batch closes:
// one write per host for a message to every worker, not one per worker plus
// the rest. The driver opens one while it tells a whole generation
// something. Channels of a stream of their own send at once, as always.
// Batches nest: the outermost one flushes.
//
// Threading: of the thread that opened it; not movable.
class ChannelBatch {
 public:
  ChannelBatch();
  ~ChannelBatch();
  ChannelBatch(const ChannelBatch&) = delete;
  ChannelBatch& operator=(const ChannelBatch&) = delete;

  // The outermost batch open on this thread, or nullptr.
  static ChannelBatch* Current();
  // `flush` runs when the batch closes (a stream's: write what it held).
  void Defer(std::function<void()> flush) { flushes_.push_back(std::move(flush)); }

 private:
  const bool outermost_;
  std::vector<std::function<void()>> flushes_;
};

}  // namespace horovodd::daemon
