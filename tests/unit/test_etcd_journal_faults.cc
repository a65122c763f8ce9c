// EtcdJournal on an etcd cluster that loses members (each case its own real
// three-member cluster): one member lost changes nothing; with the quorum
// lost, a callback waits on etcd at most one call's deadline (then writes
// are queued, not sent), Writable() names etcd, and the queued records (a
// job's end among them) are written once the quorum is back.
#include <catch2/catch.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "daemon/etcd_journal/etcd_journal.h"
#include "etcd_test_cluster.h"
#include "journal_test_support.h"

namespace horovodd::daemon {
namespace {

using testing::EndEvent;
using testing::MakeEvent;
using testing::StateEvent;

constexpr char kPrefix[] = "/hvdd-faults/";

std::unique_ptr<EtcdJournal> Open(std::shared_ptr<EtcdClient> client) {
  auto journal = EtcdJournal::Open(std::move(client), kPrefix);
  INFO(journal.status().ToString());
  REQUIRE(journal.ok());
  return std::move(*journal);
}

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.add_argv("train.py");
  spec.set_num_proc(2);
  return spec;
}

JobCheckpoint Checkpoint(int64_t commit) {
  JobCheckpoint checkpoint;
  checkpoint.status.set_job_id("job-1");
  checkpoint.status.set_last_commit(commit);
  checkpoint.planned_generation = 1;
  return checkpoint;
}

// What a new journal on the same store recovers of job-1.
ArchivedJob RecoverJob(const hvdd_test::EtcdTestCluster& cluster) {
  auto journal = Open(cluster.Client());
  auto jobs = journal->Recover();
  INFO(jobs.status().ToString());
  REQUIRE(jobs.ok());
  REQUIRE(jobs->size() == 1);
  return (*jobs)[0];
}

std::vector<uint64_t> Seqs(const ArchivedJob& job) {
  std::vector<uint64_t> seqs;
  for (const auto& e : job.events) seqs.push_back(e.seq());
  return seqs;
}

TEST_CASE("Losing one etcd member of three changes nothing", "[journal][etcd]") {
  hvdd_test::EtcdTestCluster cluster(3);
  auto journal = Open(cluster.Client());
  const double t0 = absl::ToUnixSeconds(absl::Now());
  journal->OnJobSubmitted("job-1", Spec(), absl::Now(), "");
  journal->OnJobEvent("job-1", StateEvent(1, v1::RUNNING, t0, 1));
  // The member the client was using goes.
  cluster.Kill(0);
  journal->OnJobCheckpoint("job-1", Checkpoint(7));
  journal->OnJobEvent("job-1", StateEvent(2, v1::SUCCEEDED, t0 + 1, 1));
  journal->OnJobEvent("job-1", EndEvent(3, v1::SUCCEEDED, t0 + 2, 1, "all workers finished"));
  CHECK(journal->Writable().ok());
  journal.reset();
  const ArchivedJob job = RecoverJob(cluster);
  CHECK(job.status.state() == v1::SUCCEEDED);
  CHECK(Seqs(job) == std::vector<uint64_t>{1, 2, 3});
}

TEST_CASE("Without etcd's quorum, records queue without blocking and are written when it returns",
          "[journal][etcd]") {
  hvdd_test::EtcdTestCluster cluster(3);
  const absl::Duration call_timeout = absl::Seconds(1);
  std::shared_ptr<EtcdClient> client = cluster.Client(call_timeout);
  auto journal = Open(client);
  const double t0 = absl::ToUnixSeconds(absl::Now());
  journal->OnJobSubmitted("job-1", Spec(), absl::Now(), "");
  journal->OnJobEvent("job-1", StateEvent(1, v1::RUNNING, t0, 1));
  REQUIRE(journal->Writable().ok());

  cluster.Kill(1);
  cluster.Kill(2);
  // The first write waits for etcd at most one deadline per member...
  absl::Time start = absl::Now();
  journal->OnJobCheckpoint("job-1", Checkpoint(1));
  CHECK(absl::Now() - start < 3 * call_timeout + absl::Seconds(2));
  absl::Status writable = journal->Writable();
  INFO(writable.ToString());
  CHECK(writable.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StartsWith(writable.message(), "etcd store unavailable (quorum lost?): etcd "));
  // A quorum lost, not this client cut off: the member left still answers.
  CHECK(client->AnyMemberConnected());
  // ... and the ones after it not at all: the job's driver goes on.
  start = absl::Now();
  for (int commit = 2; commit <= 50; ++commit)
    journal->OnJobCheckpoint("job-1", Checkpoint(commit));
  journal->OnJobEvent("job-1", MakeEvent(2, v1::JobEvent::WARNING, t0 + 1, 1, "a warning"));
  journal->OnJobEvent("job-1", StateEvent(3, v1::SUCCEEDED, t0 + 2, 1));
  journal->OnJobEvent("job-1", EndEvent(4, v1::SUCCEEDED, t0 + 3, 1, "all workers finished"));
  v1::JobStatus final_status;
  final_status.set_last_commit(50);
  journal->OnJobFinalStatus("job-1", final_status);
  CHECK(absl::Now() - start < absl::Seconds(1));

  cluster.Restart(1);
  cluster.Restart(2);
  // Written by the journal's own retries, with no further callback.
  const absl::Time deadline = absl::Now() + absl::Seconds(45);
  while (!journal->Writable().ok() && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(200));
  REQUIRE(journal->Writable().ok());
  journal.reset();
  const ArchivedJob job = RecoverJob(cluster);
  CHECK(job.status.state() == v1::SUCCEEDED);
  CHECK(job.status.reason() == "all workers finished");
  CHECK(job.status.last_commit() == 50);
  CHECK(Seqs(job) == std::vector<uint64_t>{1, 2, 3, 4});
}

}  // namespace
}  // namespace horovodd::daemon
