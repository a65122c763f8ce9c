#include "daemon/leadership/leader_election.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace horovodd::daemon {

LeaderElection::LeaderElection(std::shared_ptr<EtcdClient> etcd, LeaderElectionOptions options)
    : etcd_(std::move(etcd)), options_(std::move(options)) {}

LeaderElection::~LeaderElection() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  if (gate_thread_.joinable()) gate_thread_.join();
}

absl::Status LeaderElection::EnsureLease() {
  // A standby's lease is renewed by its campaigns, a leader's by Loop.
  if (lease_ != 0 && absl::Now() - last_renewal_ < options_.lease_ttl / 3) {
    return absl::OkStatus();
  }
  if (lease_ != 0) {
    absl::StatusOr<absl::Duration> renewed = etcd_->KeepAlive(lease_);
    if (renewed.ok()) {
      last_renewal_ = absl::Now();
      return absl::OkStatus();
    }
    if (renewed.status().code() != absl::StatusCode::kNotFound) return renewed.status();
    lease_ = 0;
  }
  HVDD_ASSIGN_OR_RETURN(lease_, etcd_->GrantLease(options_.lease_ttl));
  last_renewal_ = absl::Now();
  return absl::OkStatus();
}

absl::StatusOr<bool> LeaderElection::TryLead() {
  absl::MutexLock lock(&mu_);
  if (leader_) return true;
  HVDD_RETURN_IF_ERROR(EnsureLease());
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* free = txn.add_compare();
  free->set_key(options_.key);
  free->set_target(etcdserverpb::Compare::CREATE);
  free->set_result(etcdserverpb::Compare::EQUAL);
  free->set_create_revision(0);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.address);
  put->set_lease(lease_);
  // A key our own lease holds (a campaign whose answer was lost) is ours too.
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  HVDD_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, etcd_->Txn(txn));
  if (response.succeeded()) {
    leader_ = true;
  } else {
    const auto& range = response.responses(0).response_range();
    leader_ = range.kvs_size() > 0 && range.kvs(0).lease() == lease_;
  }
  return leader_;
}

absl::StatusOr<std::string> LeaderElection::Leader() {
  etcdserverpb::RangeRequest request;
  request.set_key(options_.key);
  HVDD_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, etcd_->Range(request));
  return response.kvs_size() > 0 ? response.kvs(0).value() : "";
}

bool LeaderElection::is_leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

etcdserverpb::Compare LeaderElection::Fence() const {
  absl::MutexLock lock(&mu_);
  etcdserverpb::Compare compare;
  compare.set_key(options_.key);
  compare.set_target(etcdserverpb::Compare::LEASE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_lease(lease_);
  return compare;
}

void LeaderElection::Run(std::function<void()> on_elected, std::function<void()> on_deposed) {
  on_elected_ = std::move(on_elected);
  on_deposed_ = std::move(on_deposed);
  thread_ = std::thread([this] { Loop(); });
  if (options_.gate) gate_thread_ = std::thread([this] { HoldGateWhenUnrenewed(); });
}

void LeaderElection::HoldGateWhenUnrenewed() {
  // Its own thread: a renewal (Loop) may wait on every member's deadline
  // (a partition drops packets), longer than the TTL.
  while (!stop_.WaitForNotificationWithTimeout(options_.campaign_interval)) {
    absl::MutexLock lock(&mu_);
    if (!leader_) continue;
    // A TTL without renewal: etcd may have ended the lease and a standby may
    // lead, reattached to the same workers. Until etcd answers, this
    // daemon's jobs act on no process (it cannot tell a partition from a lost
    // quorum). Loop reopens the gate at the next renewal.
    const absl::Duration unrenewed = absl::Now() - last_renewal_;
    if (unrenewed >= options_.lease_ttl) {
      options_.gate->Hold(
          absl::StrCat("cannot renew the leader's etcd lease for ",
                       absl::FormatDuration(absl::Trunc(unrenewed, absl::Seconds(1))),
                       " (etcd unreachable or without quorum)"));
    }
  }
}

void LeaderElection::Resign() {
  absl::MutexLock lock(&mu_);
  if (lease_ != 0) etcd_->RevokeLease(lease_).IgnoreError();
  lease_ = 0;
  leader_ = false;
  if (options_.gate) options_.gate->Close();
}

void LeaderElection::Loop() {
  bool was_leader = false;
  bool renewal_failed = false;
  absl::Time last_warned = absl::InfinitePast();
  while (!stop_.HasBeenNotified()) {
    if (!was_leader) {
      absl::StatusOr<bool> elected = TryLead();
      if (elected.ok() && *elected) {
        was_leader = true;
        HVDD_LOG(INFO) << "leading: " << options_.key << " holds " << options_.address;
        if (on_elected_) on_elected_();
        continue;
      }
      stop_.WaitForNotificationWithTimeout(options_.campaign_interval);
      continue;
    }
    // After a failed renewal, the next one soon: the lease runs on meanwhile.
    stop_.WaitForNotificationWithTimeout(renewal_failed ? options_.campaign_interval
                                                        : options_.lease_ttl / 3);
    if (stop_.HasBeenNotified()) break;
    bool lost = false;
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!leader_) lost = true;  // resigned
      lease = lease_;
    }
    if (!lost) {
      // Outside mu_: a renewal may wait on every member's deadline, and the
      // journal's writes ask for the fence (mu_) on the jobs' threads.
      absl::StatusOr<absl::Duration> renewed = etcd_->KeepAlive(lease);
      absl::MutexLock lock(&mu_);
      renewal_failed = !renewed.ok();
      if (!leader_ || lease_ != lease) {
        lost = true;  // resigned meanwhile
      } else if (renewed.ok()) {
        last_renewal_ = absl::Now();
        if (options_.gate) options_.gate->Open();
      } else if (renewed.status().code() == absl::StatusCode::kNotFound) {
        // Only etcd's word that the lease is gone deposes a leader: one that
        // cannot reach a quorum (etcd's own election, a partition) leads on,
        // and its writes fail meanwhile; they are fenced should another lead
        // by the time etcd answers again.
        HVDD_LOG(WARNING) << "no longer leading: " << renewed.status().message();
        lease_ = 0;
        leader_ = false;
        lost = true;
      }
    }
    if (lost) {
      was_leader = false;
      if (options_.gate) options_.gate->Close();
      if (on_deposed_) on_deposed_();
      if (!options_.campaign_after_deposed) return;
    } else {
      absl::MutexLock lock(&mu_);
      const absl::Duration unrenewed = absl::Now() - last_renewal_;
      if (unrenewed >= options_.lease_ttl && absl::Now() - last_warned >= absl::Seconds(10)) {
        last_warned = absl::Now();
        HVDD_LOG(WARNING) << "cannot renew the leader's etcd lease for "
                          << absl::FormatDuration(absl::Trunc(unrenewed, absl::Seconds(1)))
                          << ": leading on until etcd says it is gone";
      }
    }
  }
}

}  // namespace horovodd::daemon
