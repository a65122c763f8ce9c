// The journal: what one Journal records, a new one on the same store
// recovers; jobs that never ended come back FAILED; records stay bounded; a
// running job's newest checkpoint is handed back. Each case runs against
// both stores (journal_stores.h). The SQLite file's own cases (its schema,
// the refusals naming it) are in test_journal_schema.cc.
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/journal/journal.h"
#include "journal_stores.h"
#include "journal_test_support.h"

namespace horovodd::daemon {
namespace {

using testing::ElasticSpec;
using testing::EndEvent;
using testing::EtcdStore;
using testing::Ids;
using testing::MakeEvent;
using testing::NowUnix;
using testing::OpenJournal;
using testing::RecoverFrom;
using testing::Seqs;
using testing::SqliteStore;
using testing::StateEvent;

// Records a job that ran, grew once (one reset) and succeeded.
void RecordSucceededJob(Journal& journal, const std::string& id, double t0) {
  journal.OnJobSubmitted(id, ElasticSpec(), absl::FromUnixSeconds(static_cast<int64_t>(t0)), "");
  journal.OnJobEvent(id, MakeEvent(1, v1::JobEvent::INFO, t0 + 1, 0, "job submitted"));
  journal.OnJobEvent(id, MakeEvent(2, v1::JobEvent::INFO, t0 + 2, 1, "generation 1 planned"));
  v1::JobEvent output = MakeEvent(3, v1::JobEvent::OUTPUT, t0 + 3, 1, "loss 0.5");
  output.set_rank(0);
  output.set_stream("stdout");
  journal.OnJobEvent(id, output);
  journal.OnJobEvent(id, StateEvent(4, v1::RUNNING, t0 + 4, 1));
  v1::JobEvent ready = MakeEvent(5, v1::JobEvent::MEMBERSHIP, t0 + 4, 1, "generation 1 ready");
  ready.set_size(2);
  journal.OnJobEvent(id, ready);
  v1::JobEvent added = MakeEvent(6, v1::JobEvent::INFO, t0 + 5, 1, "host c added");
  added.set_code("hosts_changed");
  journal.OnJobEvent(id, added);
  journal.OnJobEvent(id, StateEvent(7, v1::RESETTING, t0 + 5, 1));
  journal.OnJobEvent(id, MakeEvent(8, v1::JobEvent::INFO, t0 + 5, 2, "generation 2 planned"));
  journal.OnJobEvent(id, StateEvent(9, v1::RUNNING, t0 + 6, 2));
  v1::JobEvent grown = MakeEvent(10, v1::JobEvent::MEMBERSHIP, t0 + 6, 2, "generation 2 ready");
  grown.set_size(3);
  grown.set_reset_seconds(0.75);
  journal.OnJobEvent(id, grown);
  journal.OnJobEvent(id, StateEvent(11, v1::SUCCEEDED, t0 + 9, 2));
  journal.OnJobEvent(id, EndEvent(12, v1::SUCCEEDED, t0 + 10, 2, "all workers finished"));
}

TEMPLATE_TEST_CASE("A new journal on the same store recovers a finished job as it was recorded",
                   "[journal]", SqliteStore, EtcdStore) {
  TestType dir;
  const double t0 = 1700000000;
  RecordSucceededJob(*OpenJournal(dir), "job-1", t0);

  const auto jobs = RecoverFrom(dir);
  REQUIRE(jobs.size() == 1);
  const v1::JobStatus& s = jobs[0].status;
  CHECK(s.job_id() == "job-1");
  CHECK(s.spec().SerializeAsString() == ElasticSpec().SerializeAsString());
  CHECK(s.state() == v1::SUCCEEDED);
  CHECK(s.reason() == "all workers finished");
  CHECK(s.generation() == 2);
  CHECK(s.size() == 3);
  CHECK(s.resets() == 1);
  CHECK(s.min_np() == 2);
  CHECK(s.max_np() == 4);
  CHECK(s.created_unix() == t0);
  CHECK(s.started_unix() == t0 + 1);
  CHECK(s.ended_unix() == t0 + 9);  // when it became SUCCEEDED

  // Every event but the worker output, in order, with what clients read.
  const auto& events = jobs[0].events;
  CHECK(Seqs(events) == std::vector<uint64_t>{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  CHECK(events[4].code() == "hosts_changed");
  CHECK(events[4].message() == "host c added");
  CHECK(events[8].kind() == v1::JobEvent::MEMBERSHIP);
  CHECK(events[8].size() == 3);
  CHECK(events[8].reset_seconds() == 0.75);
  CHECK(events[8].time_unix() == t0 + 6);
  CHECK(events.back().kind() == v1::JobEvent::JOB_ENDED);
  CHECK(events.back().state() == v1::SUCCEEDED);
  CHECK(events.back().message() == "all workers finished");
  REQUIRE(s.recent_events_size() == static_cast<int>(events.size()));
  CHECK(s.recent_events(0).seq() == 1);
}

TEMPLATE_TEST_CASE("An ended job's workers, hosts and resets come back with it", "[journal]",
                   SqliteStore, EtcdStore) {
  TestType dir;
  const double t0 = 1700000000;
  {
    auto journal = OpenJournal(dir);
    v1::JobStatus final_status;
    for (int i = 0; i < 3; ++i) {
      v1::WorkerStatus* w = final_status.add_workers();
      w->set_worker_id(i + 1);
      w->set_rank(i == 2 ? -1 : i);
      w->set_host(i == 2 ? "c" : "a");
      w->set_state(i == 2 ? v1::WORKER_FAILED : v1::WORKER_SUCCEEDED);
      w->set_exit_code(i == 2 ? 137 : 0);
      w->set_last_commit(7);
    }
    v1::HostStatus* host = final_status.add_hosts();
    host->set_host("c");
    host->set_slots(1);
    host->set_state("cooldown");
    host->set_cooldown_seconds_left(42);
    final_status.add_reset_history()->set_generation(2);
    final_status.set_last_commit(7);
    *final_status.add_recent_events() = MakeEvent(99, v1::JobEvent::INFO, t0, 0, "not kept twice");
    // As a driver does: the final status just before JOB_ENDED.
    journal->OnJobSubmitted("job-1", ElasticSpec(), absl::FromUnixSeconds(1700000000), "");
    journal->OnJobEvent("job-1", StateEvent(1, v1::RUNNING, t0 + 1, 1));
    journal->OnJobFinalStatus("job-1", final_status);
    journal->OnJobEvent("job-1", EndEvent(2, v1::FAILED, t0 + 2, 1, "worker 3 failed"));
  }
  const auto jobs = RecoverFrom(dir);
  REQUIRE(jobs.size() == 1);
  const v1::JobStatus& s = jobs[0].status;
  REQUIRE(s.workers_size() == 3);
  CHECK(s.workers(2).worker_id() == 3);
  CHECK(s.workers(2).host() == "c");
  CHECK(s.workers(2).state() == v1::WORKER_FAILED);
  CHECK(s.workers(2).exit_code() == 137);
  CHECK(s.workers(0).rank() == 0);
  CHECK(s.workers(0).last_commit() == 7);
  REQUIRE(s.hosts_size() == 1);
  CHECK(s.hosts(0).host() == "c");
  CHECK(s.hosts(0).state() == "cooldown");
  CHECK(s.hosts(0).cooldown_seconds_left() == 0);  // the job is over: no time left to count
  REQUIRE(s.reset_history_size() == 1);
  CHECK(s.reset_history(0).generation() == 2);
  CHECK(s.last_commit() == 7);
  // The events come from the events table, not from the stored status.
  CHECK(Seqs(jobs[0].events) == std::vector<uint64_t>{1, 2});
}

TEMPLATE_TEST_CASE("A job's client request id is recovered with it, ended or still running",
                   "[journal]", SqliteStore, EtcdStore) {
  TestType dir;
  const double t0 = 1700000000;
  {
    auto journal = OpenJournal(dir);
    journal->OnJobSubmitted("job-1", ElasticSpec(), absl::FromUnixSeconds(1700000000),
                            "0123456789abcdef0123456789abcdef");
    journal->OnJobEvent("job-1", EndEvent(1, v1::SUCCEEDED, t0 + 1, 1, "done"));
    journal->OnJobSubmitted("job-2", ElasticSpec(), absl::FromUnixSeconds(1700000002),
                            "fedcba9876543210-running");
    journal->OnJobEvent("job-2", StateEvent(1, v1::RUNNING, t0 + 3, 1));
    JobCheckpoint checkpoint;
    checkpoint.status.set_job_id("job-2");
    checkpoint.status.set_state(v1::RUNNING);
    checkpoint.planned_generation = 1;
    journal->OnJobCheckpoint("job-2", checkpoint);
    journal->OnJobSubmitted("job-3", ElasticSpec(), absl::FromUnixSeconds(1700000004), "");
    journal->OnJobEvent("job-3", EndEvent(1, v1::FAILED, t0 + 5, 1, "failed"));
  }
  auto journal = OpenJournal(dir);
  std::vector<ResumableJob> running;
  auto jobs = journal->Recover(&running);
  INFO(jobs.status().ToString());
  REQUIRE(jobs.ok());
  REQUIRE(Ids(*jobs) == std::vector<std::string>{"job-1", "job-3"});
  CHECK((*jobs)[0].status.client_request_id() == "0123456789abcdef0123456789abcdef");
  CHECK((*jobs)[1].status.client_request_id().empty());
  REQUIRE(running.size() == 1);
  CHECK(running[0].job_id == "job-2");
  CHECK(running[0].client_request_id == "fedcba9876543210-running");
}

TEMPLATE_TEST_CASE("A job that had not ended when the journal closed comes back FAILED, once",
                   "[journal]", SqliteStore, EtcdStore) {
  TestType dir;
  const double t0 = NowUnix() - 60;
  {
    auto journal = OpenJournal(dir);
    journal->OnJobSubmitted("job-4", ElasticSpec(), absl::Now(), "");
    journal->OnJobEvent("job-4", MakeEvent(1, v1::JobEvent::INFO, t0, 0, "job submitted"));
    journal->OnJobEvent("job-4", StateEvent(2, v1::RUNNING, t0 + 1, 1));
    v1::JobEvent ready = MakeEvent(3, v1::JobEvent::MEMBERSHIP, t0 + 1, 1);
    ready.set_size(2);
    journal->OnJobEvent("job-4", ready);
  }
  const double before_recovery = NowUnix();

  for (int restart = 0; restart < 2; ++restart) {
    INFO("restart " << restart);
    const auto jobs = RecoverFrom(dir);
    REQUIRE(jobs.size() == 1);
    const v1::JobStatus& s = jobs[0].status;
    CHECK(s.state() == v1::FAILED);
    CHECK(s.reason() ==
          "horovodd stopped while the job was running; its workers were stopped with it");
    CHECK(s.generation() == 1);
    CHECK(s.size() == 2);
    CHECK(s.ended_unix() >= before_recovery);
    // Watchers of the job see it end like any other job, exactly once.
    const auto& events = jobs[0].events;
    CHECK(Seqs(events) == std::vector<uint64_t>{1, 2, 3, 4});
    CHECK(events.back().kind() == v1::JobEvent::JOB_ENDED);
    CHECK(events.back().state() == v1::FAILED);
    CHECK(events.back().generation() == 1);
    CHECK(events.back().message() == s.reason());
  }
}

TEMPLATE_TEST_CASE("A job keeps only its newest events past the per-job limit", "[journal]",
                   SqliteStore, EtcdStore) {
  TestType dir;
  JournalLimits limits;
  limits.max_events_per_job = 10;
  const double t0 = NowUnix() - 600;
  {
    auto journal = OpenJournal(dir, limits);
    journal->OnJobSubmitted("job-1", ElasticSpec(), absl::Now(), "");
    journal->OnJobSubmitted("job-2", ElasticSpec(), absl::Now(), "");
    for (uint64_t seq = 1; seq <= 25; ++seq) {
      journal->OnJobEvent("job-1", MakeEvent(seq, v1::JobEvent::WARNING, t0 + seq));
      journal->OnJobEvent("job-2", MakeEvent(seq, v1::JobEvent::INFO, t0 + seq));
    }
    journal->OnJobEvent("job-1", EndEvent(26, v1::CANCELLED, t0 + 30, 0, "cancelled by alice"));
    // job-2 is still running when the journal closes.
  }
  const auto jobs = RecoverFrom(dir, limits);
  REQUIRE(Ids(jobs) == std::vector<std::string>{"job-1", "job-2"});
  const std::vector<uint64_t> newest{17, 18, 19, 20, 21, 22, 23, 24, 25, 26};
  CHECK(Seqs(jobs[0].events) == newest);
  CHECK(jobs[0].status.reason() == "cancelled by alice");
  // Its recorded end (seq 26) is among the ten kept.
  CHECK(Seqs(jobs[1].events) == newest);
  CHECK(jobs[1].events.back().kind() == v1::JobEvent::JOB_ENDED);
  CHECK(jobs[0].status.recent_events_size() == 10);
}

TEMPLATE_TEST_CASE("Only the most recently ended jobs are kept past the finished-job limit",
                   "[journal]", SqliteStore, EtcdStore) {
  TestType dir;
  JournalLimits limits;
  limits.max_finished_jobs = 3;
  const double t0 = NowUnix() - 3600;
  {
    auto journal = OpenJournal(dir, limits);
    // job-1 runs throughout; job-3 ends last of the others although it
    // started before jobs 4 to 6.
    for (int n = 1; n <= 6; ++n) {
      const std::string id = "job-" + std::to_string(n);
      journal->OnJobSubmitted(id, ElasticSpec(), absl::Now(), "");
      journal->OnJobEvent(id, MakeEvent(1, v1::JobEvent::INFO, t0 + n));
    }
    for (int n : {2, 4, 5, 6, 3}) {
      const std::string id = "job-" + std::to_string(n);
      const double ended = t0 + 100 + n * (n == 3 ? 10 : 1);
      journal->OnJobEvent(id, EndEvent(2, v1::SUCCEEDED, ended, 1, "done"));
    }
  }
  // job-1 is recovered (it ended now, as far as anyone knows), job-3 and
  // job-6 ended last; job-6 was also the newest submission.
  CHECK(Ids(RecoverFrom(dir, limits)) == std::vector<std::string>{"job-1", "job-3", "job-6"});
  // Recovery itself stays within the limit.
  CHECK(Ids(RecoverFrom(dir, limits)) == std::vector<std::string>{"job-1", "job-3", "job-6"});
}

TEMPLATE_TEST_CASE("Jobs recorded from several threads at once are all recovered intact",
                   "[journal]", SqliteStore, EtcdStore) {
  TestType dir;
  constexpr int kThreads = 4;
  constexpr uint64_t kEvents = 150;
  {
    auto journal = OpenJournal(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&journal, t] {
        const std::string id = "job-" + std::to_string(t + 1);
        journal->OnJobSubmitted(id, ElasticSpec(), absl::Now(), "");
        for (uint64_t seq = 1; seq < kEvents; ++seq) {
          journal->OnJobEvent(id, MakeEvent(seq, v1::JobEvent::INFO, NowUnix(), 1));
        }
        journal->OnJobEvent(id, EndEvent(kEvents, v1::SUCCEEDED, NowUnix(), 1, "done"));
      });
    }
    for (auto& thread : threads) thread.join();
  }
  const auto jobs = RecoverFrom(dir);
  REQUIRE(jobs.size() == kThreads);
  std::set<std::string> ids;
  for (const auto& job : jobs) {
    ids.insert(job.status.job_id());
    CHECK(job.status.state() == v1::SUCCEEDED);
    REQUIRE(job.events.size() == kEvents);
    CHECK(job.events.front().seq() == 1);
    CHECK(job.events.back().seq() == kEvents);
  }
  CHECK(ids == std::set<std::string>{"job-1", "job-2", "job-3", "job-4"});
}

// A running job's checkpoint: what a restarted daemon takes it back from.
JobCheckpoint RunningCheckpoint() {
  JobCheckpoint checkpoint;
  checkpoint.status.set_state(v1::RUNNING);
  checkpoint.status.set_generation(3);
  checkpoint.status.set_last_commit(41);
  checkpoint.status.set_resets(2);
  for (int id : {4, 2}) {
    v1::WorkerStatus* w = checkpoint.status.add_workers();
    w->set_worker_id(id);
    w->set_pid(1000 + id);
    w->set_host("localhost");
    w->set_rank(id == 4 ? 0 : 1);
    w->set_state(v1::WORKER_RUNNING);
  }
  checkpoint.planned_generation = 4;
  checkpoint.planned_members = {4, 2, 7};
  // Cooling down, blacklisted for good, failed once with its cooldown over.
  checkpoint.host_cooldowns = {
      {"b", 3, 2, "worker 4 exited 1", absl::FromUnixSeconds(1700000060)},
      {"c", 1, 1, "worker 2 lost", absl::InfiniteFuture()},
      {"d", 1, 1, "worker 7 exited 2", absl::InfinitePast()},
  };
  return checkpoint;
}

TEMPLATE_TEST_CASE(
    "A running job's newest checkpoint is handed back for the daemon to take it back", "[journal]",
    SqliteStore, EtcdStore) {
  TestType dir;
  {
    auto journal = OpenJournal(dir);
    journal->OnJobSubmitted("job-1", ElasticSpec(), absl::FromUnixSeconds(1700000000), "");
    journal->OnJobEvent("job-1", StateEvent(1, v1::RUNNING, 1700000001, 3));
    JobCheckpoint older = RunningCheckpoint();
    older.status.set_last_commit(5);
    older.host_cooldowns.push_back({"a", 1, 1, "gone since", absl::InfinitePast()});
    journal->OnJobCheckpoint("job-1", older);
    journal->OnJobCheckpoint("job-1", RunningCheckpoint());
    journal->OnJobEvent("job-1", MakeEvent(2, v1::JobEvent::INFO, 1700000002, 3, "commit"));
  }
  auto journal = OpenJournal(dir);
  std::vector<ResumableJob> running;
  auto archived = journal->Recover(&running);
  REQUIRE(archived.ok());
  CHECK(archived->empty());  // not archived, not FAILED: it runs on
  REQUIRE(running.size() == 1);
  const ResumableJob& job = running[0];
  CHECK(job.job_id == "job-1");
  CHECK(job.spec.name() == "resnet");
  CHECK(job.checkpoint.status.last_commit() == 41);
  CHECK(job.checkpoint.status.workers_size() == 2);
  CHECK(job.checkpoint.status.workers(0).pid() == 1004);
  CHECK(job.checkpoint.planned_generation == 4);
  CHECK(job.checkpoint.planned_members == std::vector<int64_t>{4, 2, 7});
  CHECK(job.checkpoint.last_event_seq == 2);  // its events number on after this
  // Its hosts' cooldowns as the newest checkpoint had them, by name.
  const auto& hosts = job.checkpoint.host_cooldowns;
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].host == "b");
  CHECK(hosts[0].failures == 3);
  CHECK(hosts[0].cooldowns == 2);
  CHECK(hosts[0].last_failure == "worker 4 exited 1");
  CHECK(hosts[0].until == absl::FromUnixSeconds(1700000060));
  CHECK(hosts[1].host == "c");
  CHECK(hosts[1].until == absl::InfiniteFuture());
  CHECK(hosts[2].host == "d");
  CHECK(hosts[2].failures == 1);
  CHECK(hosts[2].until == absl::InfinitePast());

  // Once it ends there is nothing to take back, and a late checkpoint
  // does not bring it back.
  journal->OnJobEvent("job-1", EndEvent(3, v1::SUCCEEDED, 1700000010, 3, "done"));
  journal->OnJobCheckpoint("job-1", RunningCheckpoint());
  journal.reset();
  auto again = OpenJournal(dir);
  std::vector<ResumableJob> none;
  auto jobs = again->Recover(&none);
  REQUIRE(jobs.ok());
  CHECK(none.empty());
  REQUIRE(jobs->size() == 1);
  CHECK((*jobs)[0].status.state() == v1::SUCCEEDED);
}

TEMPLATE_TEST_CASE(
    "Without a daemon to take it back, a checkpointed job comes back FAILED as before", "[journal]",
    SqliteStore, EtcdStore) {
  TestType dir;
  {
    auto journal = OpenJournal(dir);
    journal->OnJobSubmitted("job-1", ElasticSpec(), absl::FromUnixSeconds(1700000000), "");
    journal->OnJobCheckpoint("job-1", RunningCheckpoint());
  }
  const auto jobs = RecoverFrom(dir);  // Recover() with nowhere to put running jobs
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].status.state() == v1::FAILED);
  CHECK(jobs[0].status.reason() == Journal::kStoppedReason);
}

}  // namespace
}  // namespace horovodd::daemon
