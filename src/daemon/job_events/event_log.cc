#include "daemon/job_events/event_log.h"

namespace horovodd::daemon {

uint64_t EventLog::Append(v1::JobEvent event) {
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    seq = next_seq_++;
    event.set_seq(seq);
    if (event.time_unix() == 0) {
      event.set_time_unix(absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()));
    }
    events_.push_back(event);
    while (events_.size() > capacity_) events_.pop_front();
  }
  cv_.SignalAll();
  if (sink_) sink_(event);
  return seq;
}

void EventLog::Close() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  cv_.SignalAll();
}

EventLog::Batch EventLog::WaitFrom(uint64_t from_seq, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  // WaitWithDeadline is true once the deadline passed.
  while (!closed_ && !(next_seq_ > from_seq && next_seq_ > 1) &&
         !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  Batch batch;
  for (const auto& event : events_) {
    if (event.seq() >= from_seq) batch.events.push_back(event);
  }
  batch.next_seq =
      batch.events.empty() ? std::max<uint64_t>(from_seq, 1) : batch.events.back().seq() + 1;
  if (!events_.empty() && from_seq < events_.front().seq()) {
    // Older ones were dropped: continue from what is kept.
    batch.next_seq = events_.back().seq() + 1;
  }
  batch.closed = closed_ && batch.next_seq >= next_seq_;
  return batch;
}

std::vector<v1::JobEvent> EventLog::RecentNonOutput(size_t count) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobEvent> out;
  for (auto it = events_.rbegin(); it != events_.rend() && out.size() < count; ++it) {
    if (it->kind() != v1::JobEvent::OUTPUT) out.push_back(*it);
  }
  return {out.rbegin(), out.rend()};
}

std::vector<v1::JobEvent> EventLog::OutputOfRank(int rank, size_t count) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobEvent> out;
  for (auto it = events_.rbegin(); it != events_.rend() && out.size() < count; ++it) {
    if (it->kind() == v1::JobEvent::OUTPUT && it->rank() == rank) out.push_back(*it);
  }
  return {out.rbegin(), out.rend()};
}

}  // namespace horovodd::daemon
