#include "daemon/job_events/reset_history.h"

#include <algorithm>

namespace horovodd::daemon {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

void ResetHistory::Detected(absl::Time now) {
  if (!detected_.has_value()) detected_ = now;
}

void ResetHistory::Began(int64_t generation, const std::string& cause, absl::Time now) {
  ++resets_;
  v1::ResetRecord record;
  record.set_generation(generation);
  record.set_cause(cause);
  record.set_detected_unix(UnixSeconds(detected_.value_or(now)));
  records_.push_back(std::move(record));
  if (records_.size() > kMaxRecords) records_.pop_front();
}

void ResetHistory::Replanned(int64_t generation) {
  if (!records_.empty() && records_.back().ready_unix() == 0) {
    records_.back().set_generation(generation);
  }
}

std::optional<absl::Duration> ResetHistory::Ready(int64_t generation, absl::Time now) {
  std::optional<absl::Duration> took;
  if (detected_.has_value()) took = now - *detected_;
  detected_.reset();
  if (!records_.empty() && records_.back().generation() == generation) {
    records_.back().set_ready_unix(UnixSeconds(now));
  }
  return took;
}

void ResetHistory::Committed(int64_t generation, int64_t commit, absl::Time now) {
  last_commit_ = std::max(last_commit_, commit);
  for (auto& record : records_) {
    if (record.generation() == generation && record.resumed_unix() == 0 &&
        record.ready_unix() != 0) {
      record.set_resumed_unix(UnixSeconds(now));
    }
  }
}

}  // namespace horovodd::daemon
