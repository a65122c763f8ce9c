// A job's events, in order, for watchers: worker output, what the driver did,
// membership changes, the end. Thread-safe: the driver, the launcher's I/O
// thread and gRPC watch handlers all use it. Bounded: the oldest events are
// dropped past `capacity`, so a chatty job cannot exhaust the daemon's memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/loop/clock.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class EventLog {
 public:
  // Called with each appended event, outside the log's lock, on the appending thread.
  using Sink = std::function<void(const v1::JobEvent&)>;

  // Events are stamped with `clock`'s time; it outlives the log.
  explicit EventLog(size_t capacity = 20000, Sink sink = nullptr, const Clock* clock = &RealClock())
      : capacity_(capacity), sink_(std::move(sink)), clock_(clock) {}

  // The first event appended gets `seq` (a job taken back after a daemon
  // restart continues its numbering). Before any Append.
  void ContinueAt(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (events_.empty()) next_seq_ = std::max(next_seq_, seq);
  }
  // Stamps seq and time, keeps it, wakes watchers. Returns the seq.
  uint64_t Append(v1::JobEvent event) ABSL_LOCKS_EXCLUDED(mu_);
  // No events follow (the job ended); watchers drain and stop.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  struct Batch {
    std::vector<v1::JobEvent> events;
    bool closed = false;    // nothing after these, ever
    uint64_t next_seq = 0;  // where to continue
  };
  // Events with seq >= from_seq; waits until there is at least one, the log
  // is closed, or `deadline` passes (then the batch may be empty).
  Batch WaitFrom(uint64_t from_seq, absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);
  // The newest `count` events whose kind is not OUTPUT (for status views).
  std::vector<v1::JobEvent> RecentNonOutput(size_t count) const ABSL_LOCKS_EXCLUDED(mu_);
  // The newest `count` output lines of `rank`, oldest first.
  std::vector<v1::JobEvent> OutputOfRank(int rank, size_t count) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t capacity_;
  const Sink sink_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  mutable absl::CondVar cv_;  // signalled on each Append and on Close
  std::deque<v1::JobEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::daemon
