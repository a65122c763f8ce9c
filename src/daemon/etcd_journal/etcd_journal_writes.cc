// EtcdJournal's writes: each fenced by the leader's lease when a fence is
// set, and those no etcd member can take queued in order and retried off
// the jobs' threads until etcd answers again.
#include "daemon/etcd_journal/etcd_journal.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

// etcd refuses a transaction of more than 128 operations (--max-txn-ops).
constexpr size_t kMaxOpsPerTxn = 100;

}  // namespace

void EtcdJournal::SetFence(etcdserverpb::Compare compare, std::function<void()> on_refused) {
  absl::MutexLock lock(&mu_);
  fence_ = std::move(compare);
  on_refused_ = std::move(on_refused);
}

absl::Status EtcdJournal::CommitFenced(Ops ops, const std::optional<etcdserverpb::Compare>& fence,
                                       int64_t* revision) {
  for (size_t begin = 0; begin < ops.size(); begin += kMaxOpsPerTxn) {
    etcdserverpb::TxnRequest txn;
    if (fence.has_value()) *txn.add_compare() = *fence;
    const size_t end = std::min(ops.size(), begin + kMaxOpsPerTxn);
    for (size_t i = begin; i < end; ++i) *txn.add_success() = std::move(ops[i]);
    HVDD_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, etcd_->Txn(txn));
    if (!response.succeeded()) {
      return absl::FailedPreconditionError(
          "this horovodd no longer leads (its etcd lease is gone): the write was refused");
    }
    if (revision != nullptr) *revision = response.header().revision();
  }
  return absl::OkStatus();
}

absl::Status EtcdJournal::Commit(Ops ops, int64_t* revision) {
  return CommitFenced(std::move(ops), fence_, revision);
}

absl::Status EtcdJournal::StoreUnavailable(const absl::Status& cause) const {
  // Not UNAVAILABLE: this daemon answered, and clients must not take it for
  // one they could not reach and try the next.
  return absl::FailedPreconditionError(
      absl::StrCat("etcd store unavailable (quorum lost?): ", cause.message(),
                   "; running jobs' workers keep training, and their records are written "
                   "once etcd answers again"));
}

absl::Status EtcdJournal::Writable() {
  {
    absl::MutexLock lock(&mu_);
    if (writes_failing_) return StoreUnavailable(store_error_);
  }
  // A linearizable read needs the quorum, as a write does (asked each time:
  // submits are rare, and a write a moment ago says nothing of now).
  etcdserverpb::RangeRequest request;
  request.set_key(prefix_ + "version");
  request.set_count_only(true);
  absl::StatusOr<etcdserverpb::RangeResponse> read = etcd_->Range(request);
  if (!read.ok()) return StoreUnavailable(read.status());
  return absl::OkStatus();
}

absl::Status EtcdJournal::Write(Ops ops, int64_t* revision) {
  if (writes_failing_) {
    Enqueue(std::move(ops));
    // Not StoreUnavailable's FAILED_PRECONDITION: that code is the fence's.
    return absl::UnavailableError(store_error_.message());
  }
  Ops kept = ops;
  absl::Status status = Commit(std::move(ops), revision);
  if (status.ok()) {
    return status;
  }
  if (status.code() == absl::StatusCode::kFailedPrecondition) return status;  // the fence
  HVDD_LOG(ERROR) << "journal: cannot write to " << Describe() << ": " << status.message()
                  << " (this write and the next ones are queued and tried again every "
                  << absl::FormatDuration(kRetryInterval) << ")";
  writes_failing_ = true;
  store_error_ = status;
  Enqueue(std::move(kept));
  return status;
}

void EtcdJournal::Enqueue(Ops ops) {
  // A later put of a key makes an earlier queued one moot (not the one
  // being written: it is sent as it was).
  std::set<std::string> puts;
  for (const auto& op : ops) {
    if (op.has_request_put()) puts.insert(op.request_put().key());
  }
  for (size_t i = front_in_flight_ ? 1 : 0; i < queued_.size(); ++i) {
    Ops& earlier = queued_[i];
    earlier.erase(std::remove_if(earlier.begin(), earlier.end(),
                                 [&puts](const etcdserverpb::RequestOp& op) {
                                   return op.has_request_put() &&
                                          puts.count(op.request_put().key()) > 0;
                                 }),
                  earlier.end());
  }
  queued_.erase(std::remove_if(queued_.begin() + (front_in_flight_ ? 1 : 0), queued_.end(),
                               [](const Ops& batch) { return batch.empty(); }),
                queued_.end());
  queued_.push_back(std::move(ops));
}

void EtcdJournal::RetryLoop() {
  while (!stop_.WaitForNotificationWithTimeout(kRetryInterval)) {
    // Oldest first, one transaction at a time, etcd called without mu_.
    for (;;) {
      Ops batch;
      std::optional<etcdserverpb::Compare> fence;
      {
        absl::MutexLock lock(&mu_);
        if (queued_.empty()) {
          if (writes_failing_) {
            HVDD_LOG(INFO) << "journal " << Describe()
                           << ": etcd answers again; the queued records are written";
            writes_failing_ = false;
            store_error_ = absl::OkStatus();
          }
          break;
        }
        batch = queued_.front();
        fence = fence_;
        front_in_flight_ = true;
      }
      absl::Status status = CommitFenced(std::move(batch), fence);
      {
        absl::MutexLock lock(&mu_);
        front_in_flight_ = false;
        if (status.ok()) {
          queued_.pop_front();
          continue;
        }
        if (status.code() != absl::StatusCode::kFailedPrecondition) {
          store_error_ = status;
          break;  // still down: next interval
        }
        // Deposed: nothing queued may be written.
        queued_.clear();
        writes_failing_ = false;
      }
      NoteWrite(status);
      break;
    }
  }
}

void EtcdJournal::NoteWrite(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kFailedPrecondition) return;
  std::function<void()> refused;
  {
    absl::MutexLock lock(&mu_);
    refused = on_refused_;
  }
  if (refused) refused();
}

}  // namespace horovodd::daemon
