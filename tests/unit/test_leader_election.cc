// Leader election over a real three-member etcd cluster: one of two
// campaigners leads and the other sees its address; the leader's fence lets
// its journal write and refuses a deposed leader's; a leader that stops
// renewing (as a killed one does) is replaced within its lease TTL; a leader
// that cannot renew for a TTL holds its decision gate until it renews again,
// and closes it when deposed.
#include <atomic>

#include <catch2/catch.hpp>

#include "absl/synchronization/notification.h"
#include "daemon/etcd_journal/etcd_journal.h"
#include "daemon/leadership/leader_election.h"
#include "etcd_test_cluster.h"
#include "journal_test_support.h"

namespace horovodd::daemon {
namespace {

LeaderElectionOptions Options(const std::string& address) {
  LeaderElectionOptions options;
  options.key = "/hvdd-test/leader";
  options.address = address;
  options.lease_ttl = absl::Seconds(2);
  options.campaign_interval = absl::Milliseconds(100);
  return options;
}

TEST_CASE("One daemon leads, the other sees where, and takes over once the leader's lease ends") {
  hvdd_test::EtcdTestCluster cluster(3);
  auto a = std::make_unique<LeaderElection>(cluster.Client(), Options("host-a:7451"));
  LeaderElection b(cluster.Client(), Options("host-b:7451"));
  auto a_leads = a->TryLead();
  INFO(a_leads.status().ToString());
  REQUIRE(a_leads.ok());
  CHECK(*a_leads);
  auto b_leads = b.TryLead();
  REQUIRE(b_leads.ok());
  CHECK_FALSE(*b_leads);
  CHECK(*b.Leader() == "host-a:7451");

  // The leader's journal writes under its fence; once deposed, they are refused.
  auto journal = EtcdJournal::Open(cluster.Client(), "/hvdd-test/jobs/");
  REQUIRE(journal.ok());
  std::atomic<int> refused{0};
  (*journal)->SetFence(a->Fence(), [&refused] { ++refused; });
  (*journal)->OnJobSubmitted("job-1", v1::JobSpec(), absl::Now(), "");
  CHECK(refused == 0);

  absl::Notification b_elected;
  b.Run([&b_elected] { b_elected.Notify(); }, [] {});
  // A leader that stops renewing, as a killed one does: its lease runs out.
  const absl::Time killed = absl::Now();
  a.reset();
  REQUIRE(b_elected.WaitForNotificationWithTimeout(absl::Seconds(2) + absl::Seconds(5)));
  const absl::Duration takeover = absl::Now() - killed;
  CHECK(takeover <= absl::Seconds(2) + absl::Seconds(2));
  CHECK(*b.Leader() == "host-b:7451");
  CHECK(b.is_leader());

  // The deposed leader's journal cannot write any more.
  (*journal)->OnJobEvent("job-1", testing::MakeEvent(1, v1::JobEvent::INFO, testing::NowUnix()));
  CHECK(refused == 1);
  auto jobs = (*journal)->ReadAll();
  REQUIRE(jobs.ok());
  REQUIRE(jobs->size() == 1);
  CHECK(jobs->front().events.empty());
}

TEST_CASE("A leader that resigns leaves the key at once") {
  hvdd_test::EtcdTestCluster cluster(1);
  LeaderElection a(cluster.Client(), Options("host-a:7451"));
  REQUIRE(*a.TryLead());
  a.Resign();
  CHECK_FALSE(a.is_leader());
  CHECK(a.Leader()->empty());
  LeaderElection b(cluster.Client(), Options("host-b:7451"));
  CHECK(*b.TryLead());
}

TEST_CASE(
    "A leader that cannot reach a quorum leads on; only etcd's word that its lease is gone "
    "deposes it") {
  hvdd_test::EtcdTestCluster cluster(3);
  LeaderElectionOptions options = Options("host-a:7451");
  options.campaign_after_deposed = false;  // as horovodd, which exits
  options.gate = std::make_shared<DecisionGate>();
  LeaderElection a(cluster.Client(absl::Milliseconds(500)), options);
  REQUIRE(*a.TryLead());
  CHECK(options.gate->open());
  std::atomic<int> deposed{0};
  a.Run(nullptr, [&deposed] { ++deposed; });
  cluster.Kill(1);
  cluster.Kill(2);
  // Renewals fail for twice the TTL: the leader stays one.
  absl::SleepFor(absl::Seconds(4));
  CHECK(deposed == 0);
  CHECK(a.is_leader());
  // But after a TTL without renewal its jobs hold their decisions.
  CHECK(options.gate->state() == DecisionGate::State::kHeld);
  CHECK_THAT(options.gate->why_held(),
             Catch::StartsWith("cannot renew the leader's etcd lease for ") &&
                 Catch::EndsWith("s (etcd unreachable or without quorum)"));
  cluster.Restart(1);
  cluster.Restart(2);
  // The quorum is back and the lease still holds: a renewal reopens the gate.
  for (int i = 0; i < 200 && !options.gate->open(); ++i) absl::SleepFor(absl::Milliseconds(100));
  CHECK(options.gate->open());

  // etcd ends the lease (as it does once the TTL passes without renewal): deposed.
  auto observer = cluster.Client();
  etcdserverpb::RangeRequest request;
  request.set_key("/hvdd-test/leader");
  int64_t lease = 0;
  for (int i = 0; i < 100 && lease == 0; ++i) {
    auto held = observer->Range(request);
    if (held.ok() && held->kvs_size() > 0) lease = held->kvs(0).lease();
    if (lease == 0) absl::SleepFor(absl::Milliseconds(100));
  }
  REQUIRE(lease != 0);
  REQUIRE(observer->RevokeLease(lease).ok());
  for (int i = 0; i < 100 && deposed == 0; ++i) absl::SleepFor(absl::Milliseconds(100));
  CHECK(deposed == 1);
  CHECK_FALSE(a.is_leader());
  CHECK(options.gate->state() == DecisionGate::State::kClosed);
}

}  // namespace
}  // namespace horovodd::daemon
