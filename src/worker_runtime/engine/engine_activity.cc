#include "worker_runtime/engine/engine_activity.h"

#include <algorithm>

#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {

std::string ActivityOperationOf(const Request& request) {
  switch (request.kind) {
    case RequestKind::kAllreduce:
      return "allreduce";
    case RequestKind::kBroadcast:
      return "broadcast";
    case RequestKind::kAllgather:
      return "allgather";
    case RequestKind::kJoin:
      return "join";
    case RequestKind::kOpaque:
      break;
  }
  return request.opaque_operation.substr(0, request.opaque_operation.find(' '));
}

void ActivityTracker::Submitted(int set, const std::string& name, const std::string& operation,
                                absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (pending_.empty()) busy_since_ = now;
  pending_[{set, name}] = Pending{operation, now};
}

void ActivityTracker::Completed(int set, const std::string& name, bool ok, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (pending_.erase({set, name}) != 0 && pending_.empty()) {
    waited_ += std::max(absl::ZeroDuration(), now - busy_since_);
  }
  if (ok) ++completed_;
}

void ActivityTracker::NewGeneration() {
  absl::MutexLock lock(&mu_);
  completed_ = 0;
  commit_times_.clear();
  commit_waits_.clear();
}

void ActivityTracker::Committed(int64_t commits, absl::Time now) {
  absl::MutexLock lock(&mu_);
  last_commit_ = commits;
  last_commit_at_ = now;
  commit_times_.push_back(now);
  const absl::Duration open =
      pending_.empty() ? absl::ZeroDuration() : std::max(absl::ZeroDuration(), now - busy_since_);
  commit_waits_.push_back(waited_ + open);
  while (commit_times_.size() > kStepWindow + 1) commit_times_.pop_front();
  while (commit_waits_.size() > kStepWindow + 1) commit_waits_.pop_front();
}

ActivitySnapshot ActivityTracker::Snapshot() const {
  absl::MutexLock lock(&mu_);
  ActivitySnapshot s;
  s.waiting_on = peer_wait_->Current();
  s.pending = static_cast<int>(pending_.size());
  s.completed = completed_;
  s.last_commit = last_commit_;
  s.last_commit_at = last_commit_at_;
  if (commit_times_.size() >= 2) {
    s.step = (commit_times_.back() - commit_times_.front()) /
             static_cast<double>(commit_times_.size() - 1);
    s.step_wait = (commit_waits_.back() - commit_waits_.front()) /
                  static_cast<double>(commit_waits_.size() - 1);
  }
  for (const auto& [key, p] : pending_) {
    if (s.waiting.has_value() && s.waiting->since <= p.since) continue;
    s.waiting = CollectiveWaitInfo{UserFacingName(key.second), p.operation, key.first, p.since};
  }
  return s;
}

}  // namespace horovodd::internal
