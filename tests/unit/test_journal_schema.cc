// The journal's SQLite file: a journal written by an older schema is
// upgraded in place; a state dir or database that cannot be used is refused
// with its path named; limits below 1 are refused. What a journal records
// and recovers is test_journal.cc's.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/journal/journal.h"
#include "daemon/journal/journal_sqlite.h"
#include "journal_stores.h"
#include "journal_test_support.h"

namespace horovodd::daemon {
namespace {

using testing::ElasticSpec;
using testing::EndEvent;
using testing::Ids;
using testing::OpenJournal;
using testing::RecoverFrom;
using testing::TempDir;

TEST_CASE("A journal written by the previous schema is upgraded in place and kept") {
  TempDir dir;
  {
    auto db = SqliteDb::Open(dir.File(Journal::kFileName));
    REQUIRE(db.ok());
    // Version 1: the jobs table without final_status, and one job that ended.
    const std::string spec = ElasticSpec().SerializeAsString();
    std::string hex;
    for (unsigned char c : spec) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
    REQUIRE((*db)
                ->Exec(absl::StrCat(
                    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                    "INSERT INTO schema_version VALUES (1);"
                    "CREATE TABLE jobs (id TEXT NOT NULL UNIQUE, name TEXT NOT NULL,"
                    " spec BLOB NOT NULL, state TEXT NOT NULL,"
                    " reason TEXT NOT NULL DEFAULT '', created_unix REAL NOT NULL,"
                    " started_unix REAL NOT NULL DEFAULT 0,"
                    " ended_unix REAL NOT NULL DEFAULT 0,"
                    " finished INTEGER NOT NULL DEFAULT 0,"
                    " generation INTEGER NOT NULL DEFAULT 0,"
                    " size INTEGER NOT NULL DEFAULT 0, resets INTEGER NOT NULL DEFAULT 0);"
                    "CREATE INDEX jobs_by_finished ON jobs (finished);"
                    "CREATE TABLE events (job_id TEXT NOT NULL REFERENCES jobs (id)"
                    " ON DELETE CASCADE, seq INTEGER NOT NULL, time_unix REAL NOT NULL,"
                    " kind TEXT NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL,"
                    " generation INTEGER NOT NULL, state TEXT NOT NULL,"
                    " size INTEGER NOT NULL, reset_seconds REAL NOT NULL,"
                    " PRIMARY KEY (job_id, seq)) WITHOUT ROWID;"
                    "INSERT INTO jobs (id, name, spec, state, reason, created_unix,"
                    " finished) VALUES ('job-1', 'resnet', x'",
                    hex, "', 'SUCCEEDED', 'all workers finished', 1700000000, 1);"))
                .ok());
  }
  {
    const auto jobs = RecoverFrom(dir);
    REQUIRE(Ids(jobs) == std::vector<std::string>{"job-1"});
    CHECK(jobs[0].status.state() == v1::SUCCEEDED);
    CHECK(jobs[0].status.spec().name() == "resnet");
    CHECK(jobs[0].status.workers_size() == 0);  // version 1 did not keep them
  }
  // Upgraded: a job ending now keeps its tables, and the file reads as version 5.
  {
    auto journal = OpenJournal(dir);
    v1::JobStatus final_status;
    final_status.add_workers()->set_host("a");
    journal->OnJobSubmitted("job-2", ElasticSpec(), absl::FromUnixSeconds(1700000100), "");
    journal->OnJobFinalStatus("job-2", final_status);
    journal->OnJobEvent("job-2", EndEvent(1, v1::SUCCEEDED, 1700000101, 1, "done"));
  }
  const auto jobs = RecoverFrom(dir);
  REQUIRE(Ids(jobs) == std::vector<std::string>{"job-1", "job-2"});
  REQUIRE(jobs[1].status.workers_size() == 1);
  CHECK(jobs[1].status.workers(0).host() == "a");
  auto db = SqliteDb::Open(dir.File(Journal::kFileName));
  REQUIRE(db.ok());
  auto version = (*db)->Prepare("SELECT version FROM schema_version");
  REQUIRE(version.ok());
  absl::StatusOr<bool> row = (*version)->Step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  CHECK((*version)->Int(0) == 5);
}

TEST_CASE("An empty state dir recovers no jobs") {
  TempDir dir;
  CHECK(RecoverFrom(dir).empty());
  struct stat st;
  REQUIRE(stat(dir.File("horovodd.db").c_str(), &st) == 0);
  // The specs carry the jobs' environment: the file is the daemon user's only.
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("A state dir or database that cannot be used is refused, naming it") {
  TempDir dir;

  SECTION("the state dir does not exist") {
    const std::string missing = dir.File("no-such-dir");
    auto journal = Journal::Open(missing);
    CHECK(journal.status().code() == absl::StatusCode::kNotFound);
    CHECK(journal.status().message() == "state dir " + missing + " does not exist");
  }
  SECTION("the state dir is a file") {
    std::ofstream(dir.File("plain-file")) << "x";
    auto journal = Journal::Open(dir.File("plain-file"));
    CHECK(journal.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(journal.status().message() ==
          "state dir " + dir.File("plain-file") + " is not a directory");
  }
  SECTION("the database file is not a database") {
    std::ofstream(dir.File("horovodd.db")) << std::string(8192, '#');
    auto journal = Journal::Open(dir.path());
    CHECK(journal.status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(
        std::string(journal.status().message()),
        Catch::StartsWith("journal " + dir.File("horovodd.db") + ": file is not a database") &&
            Catch::Contains("move the file aside"));
  }
  SECTION("the database path is a directory") {
    REQUIRE(mkdir(dir.File("horovodd.db").c_str(), 0700) == 0);
    auto journal = Journal::Open(dir.path());
    CHECK(journal.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(journal.status().message() ==
          "cannot open journal " + dir.File("horovodd.db") + ": Is a directory");
  }
  SECTION("the database was written by a newer horovodd") {
    OpenJournal(dir);
    {
      auto db = SqliteDb::Open(dir.File("horovodd.db"));
      REQUIRE(db.ok());
      REQUIRE((*db)->Exec("UPDATE schema_version SET version = 7").ok());
    }
    auto journal = Journal::Open(dir.path());
    CHECK(journal.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(journal.status().message() ==
          "journal " + dir.File("horovodd.db") +
              " was written by a newer horovodd (schema version 7; this one reads version 5)");
  }
  SECTION("the state dir is not writable") {
    // root writes anywhere: only an unprivileged user sees this refusal.
    if (geteuid() != 0) {
      REQUIRE(chmod(dir.path().c_str(), 0500) == 0);
      auto journal = Journal::Open(dir.path());
      chmod(dir.path().c_str(), 0700);
      CHECK(journal.status().code() == absl::StatusCode::kPermissionDenied);
      CHECK(journal.status().message() ==
            "state dir " + dir.path() + " is not writable: Permission denied");
    }
  }
}

TEST_CASE("Journal limits below 1 are refused") {
  TempDir dir;
  JournalLimits limits;
  limits.max_events_per_job = 0;
  auto journal = Journal::Open(dir.path(), limits);
  CHECK(journal.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(journal.status().message() ==
        "journal limits must be at least 1 (events per job 0, finished jobs 1000)");
}

}  // namespace
}  // namespace horovodd::daemon
