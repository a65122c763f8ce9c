// Which of several horovodd sharing one etcd leads: the one whose lease
// holds the leader key (<prefix>leader, its value the leader's address).
// A daemon campaigns by creating the key with its lease in a transaction
// that succeeds only while the key does not exist; it keeps the lease alive
// every TTL/3. When the leader dies (or cannot reach etcd for a TTL), its
// lease expires, etcd deletes the key, and the next campaign wins. A leader
// counts itself deposed only when etcd says its lease is gone: failed
// renewals alone (etcd without a quorum) do not depose it; but once a leader
// has gone a full TTL without renewing, a standby may lead already, so its
// decision gate is held (its jobs act on no process) until a renewal
// succeeds again (the gate opens) or etcd says the lease is gone (closed).
//
// Fence() is the compare a leader puts on every write (the key's lease is
// still this daemon's): a deposed leader's writes fail instead of landing.
//
// Threading: Run starts one thread that campaigns and keeps the lease
// alive; the callbacks come from it. With a gate, a second thread holds it
// once the lease goes unrenewed for a TTL (a renewal may block longer). The rest is safe from any
// thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/decision_gate/decision_gate.h"
#include "daemon/etcd_client/etcd_client.h"

namespace horovodd::daemon {

struct LeaderElectionOptions {
  std::string key;      // e.g. "/horovodd/leader"
  std::string address;  // what the key holds while this daemon leads: where clients reach it
  // How long a leader that stopped renewing stays leader: what a takeover waits at most
  // (plus one campaign interval).
  absl::Duration lease_ttl = absl::Seconds(5);
  // How often a standby looks whether the key is free.
  absl::Duration campaign_interval = absl::Milliseconds(250);
  // After on_deposed, Run campaigns again (true) or its thread ends (false: a
  // daemon that exits once deposed must not win again on its way out).
  bool campaign_after_deposed = true;
  // Held while leading without a renewal for lease_ttl, open again on the
  // next renewal, closed when deposed or resigned. May be null.
  std::shared_ptr<DecisionGate> gate;
};

class LeaderElection {
 public:
  LeaderElection(std::shared_ptr<EtcdClient> etcd, LeaderElectionOptions options);
  // Stops the thread; a leader's lease is left to expire (Resign gives it up at once).
  ~LeaderElection();

  // One campaign now, on this thread: true if this daemon leads (already or
  // from now on). UNAVAILABLE naming etcd if no member answers.
  absl::StatusOr<bool> TryLead() ABSL_LOCKS_EXCLUDED(mu_);
  // The leader's address as etcd has it now; "" when none leads.
  absl::StatusOr<std::string> Leader();
  bool is_leader() const ABSL_LOCKS_EXCLUDED(mu_);
  // The compare that holds while this daemon leads (meaningful once it does).
  etcdserverpb::Compare Fence() const ABSL_LOCKS_EXCLUDED(mu_);

  // Campaigns until elected (then `on_elected`), keeps the lease alive, and
  // calls `on_deposed` when etcd says the lease is gone; then campaigns
  // again (or stops, options.campaign_after_deposed). Once.
  void Run(std::function<void()> on_elected, std::function<void()> on_deposed);
  // Gives the leadership up now (revokes the lease: the key goes with it).
  void Resign() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();
  // Holds options_.gate once the leader has gone a TTL without renewing.
  void HoldGateWhenUnrenewed() ABSL_LOCKS_EXCLUDED(mu_);
  // A fresh lease if there is none.
  absl::Status EnsureLease() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<EtcdClient> etcd_;
  const LeaderElectionOptions options_;
  std::function<void()> on_elected_;
  std::function<void()> on_deposed_;
  mutable absl::Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_renewal_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
  std::thread gate_thread_;  // with options_.gate
};

}  // namespace horovodd::daemon
