#include "daemon/journal/sqlite_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/journal/journal_sqlite.h"
#include "daemon/journal/sqlite_journal_internal.h"

namespace horovodd::daemon {
namespace {

using journal_internal::ForEachRow;
using journal_internal::kCheckpointHostsTable;
using journal_internal::kCheckpointsTable;
using journal_internal::RecoveryError;
using journal_internal::UnixSeconds;

// Bump with a migration in EnsureSchema when the tables change.
// 2: jobs.final_status (version 1 files are upgraded in place).
// 3: checkpoints (running jobs a restarted daemon takes back).
// 4: checkpoint_hosts (their hosts' cooldowns).
// 5: jobs.client_request_id (a repeated submission finds its job).
constexpr int64_t kSchemaVersion = 5;

// As many as a live job's status shows.
constexpr size_t kRecentEvents = 20;

// States and kinds are stored by name so that an operator's sqlite3 shell
// reads them; times are Unix seconds.
constexpr const char* kSchema = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  spec BLOB NOT NULL,                     -- horovodd.v1.JobSpec, serialized
  state TEXT NOT NULL,                    -- horovodd.v1.JobState name
  reason TEXT NOT NULL DEFAULT '',        -- why it ended
  created_unix REAL NOT NULL,
  started_unix REAL NOT NULL DEFAULT 0,
  ended_unix REAL NOT NULL DEFAULT 0,
  finished INTEGER NOT NULL DEFAULT 0,    -- 1 once JOB_ENDED is recorded
  generation INTEGER NOT NULL DEFAULT 0,  -- newest ready generation
  size INTEGER NOT NULL DEFAULT 0,        -- its number of workers
  resets INTEGER NOT NULL DEFAULT 0,
  final_status BLOB NOT NULL DEFAULT x'', -- horovodd.v1.JobStatus at the end: workers, hosts
  client_request_id TEXT NOT NULL DEFAULT ''  -- SubmitJobRequest.client_request_id
);
CREATE INDEX jobs_by_finished ON jobs (finished);
CREATE TABLE events (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  time_unix REAL NOT NULL,
  kind TEXT NOT NULL,                     -- horovodd.v1.JobEvent.Kind name
  code TEXT NOT NULL,
  message TEXT NOT NULL,
  generation INTEGER NOT NULL,
  state TEXT NOT NULL,
  size INTEGER NOT NULL,
  reset_seconds REAL NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
)sql";

bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

v1::JobState ParseState(const std::string& name) {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  v1::JobState_Parse(name, &state);
  return state;
}

v1::JobEvent::Kind ParseKind(const std::string& name) {
  v1::JobEvent::Kind kind = v1::JobEvent::KIND_UNSPECIFIED;
  v1::JobEvent::Kind_Parse(name, &kind);
  return kind;
}

absl::Status CheckStateDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("state dir ", dir, " does not exist"));
    return absl::PermissionDeniedError(
        absl::StrCat("state dir ", dir, " cannot be read: ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("state dir ", dir, " is not a directory"));
  }
  // SQLite creates its -wal and -shm files next to the database.
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("state dir ", dir, " is not writable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Creates the file ourselves, private to the daemon's user (specs carry the
// jobs' environment; SQLite gives its -wal and -shm files the same mode), and
// turns a path that cannot be opened into an error saying why.
absl::Status CreateDatabaseFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    const std::string message =
        absl::StrCat("cannot open journal ", path, ": ", std::strerror(error));
    if (error == EACCES || error == EPERM || error == EROFS) {
      return absl::PermissionDeniedError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  close(fd);
  return absl::OkStatus();
}

// An existing database's schema version, if this horovodd reads it.
absl::StatusOr<int64_t> CheckVersion(SqliteDb& db) {
  HVDD_ASSIGN_OR_RETURN(auto query, db.Prepare("SELECT version FROM schema_version"));
  int64_t version = 0;
  auto status = ForEachRow(*query, [&](SqliteStatement& row) {
    version = row.Int(0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(db.path(), " was written by a newer horovodd (schema version ", version,
                     "; this one reads version ", kSchemaVersion, ")"));
  }
  if (version < 1) {
    return absl::DataLossError(
        absl::StrCat(db.path(), " has no valid schema version (found ", version, ")"));
  }
  return version;
}

// Brings a database of an older version to kSchemaVersion.
absl::Status Upgrade(SqliteDb& db, int64_t version) {
  if (version == 1) {
    if (auto st = db.Exec("ALTER TABLE jobs ADD COLUMN final_status BLOB NOT NULL DEFAULT x''");
        !st.ok()) {
      return st;
    }
  }
  if (version <= 2) HVDD_RETURN_IF_ERROR(db.Exec(kCheckpointsTable));
  if (version <= 3) HVDD_RETURN_IF_ERROR(db.Exec(kCheckpointHostsTable));
  if (version <= 4) {
    HVDD_RETURN_IF_ERROR(
        db.Exec("ALTER TABLE jobs ADD COLUMN client_request_id TEXT NOT NULL DEFAULT ''"));
  }
  if (version == kSchemaVersion) return absl::OkStatus();
  return db.Exec(absl::StrCat("UPDATE schema_version SET version = ", kSchemaVersion));
}

// Creates the tables in a new database, or checks an existing one's version.
absl::Status EnsureSchema(SqliteDb& db) {
  HVDD_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  auto has_schema = db.Prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  absl::Status status = has_schema.status();
  bool exists = false;
  if (status.ok()) {
    status = ForEachRow(**has_schema, [&](SqliteStatement& row) {
      exists = row.Int(0) > 0;
      return absl::OkStatus();
    });
  }
  if (status.ok() && exists) {
    absl::StatusOr<int64_t> version = CheckVersion(db);
    status = version.ok() ? Upgrade(db, *version) : version.status();
  } else if (status.ok()) {
    status = db.Exec(absl::StrCat(kSchema, kCheckpointsTable, kCheckpointHostsTable,
                                  "INSERT INTO schema_version VALUES (", kSchemaVersion, ");"));
  }
  if (status.ok()) return db.Exec("COMMIT");
  db.Exec("ROLLBACK").IgnoreError();
  return status;
}

// Errors from Open say which journal; a broken file says how to get going again.
absl::Status OpenError(const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("journal ", status.message(),
                                   status.code() == absl::StatusCode::kDataLoss
                                       ? "; move the file aside to start with an empty journal"
                                       : ""));
}

}  // namespace

absl::Status SqliteJournal::Statements::Prepare(SqliteDb& db) {
  const std::pair<std::unique_ptr<SqliteStatement>*, const char*> all[] = {
      {&begin, "BEGIN IMMEDIATE"},
      {&commit, "COMMIT"},
      {&rollback, "ROLLBACK"},
      {&insert_job,
       "INSERT INTO jobs (id, name, spec, state, created_unix, client_request_id)"
       " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
      {&insert_event,
       "INSERT INTO events (job_id, seq, time_unix, kind, code, message, generation, state, "
       "size, reset_seconds) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
      // Every event: the first one marks the start; each planned generation
      // after the first is a reset.
      {&touch_job,
       "UPDATE jobs SET started_unix = CASE WHEN started_unix = 0 THEN ?2 ELSE started_unix END,"
       " resets = MAX(resets, ?3 - 1) WHERE id = ?1"},
      // ?3: the event's time for a terminal state, else 0.
      {&set_state, "UPDATE jobs SET state = ?2, ended_unix = MAX(ended_unix, ?3) WHERE id = ?1"},
      {&set_membership, "UPDATE jobs SET generation = ?2, size = ?3 WHERE id = ?1"},
      {&set_ended,
       "UPDATE jobs SET state = ?2, reason = ?3, generation = ?4, finished = 1,"
       " ended_unix = CASE WHEN ended_unix = 0 THEN ?5 ELSE ended_unix END WHERE id = ?1"},
      {&set_final_status, "UPDATE jobs SET final_status = ?2 WHERE id = ?1"},
      // Keeps the newest ?2 events of job ?1.
      {&prune_events,
       "DELETE FROM events WHERE job_id = ?1 AND seq <= (SELECT seq FROM events"
       " WHERE job_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)"},
      // Keeps the ?1 finished jobs that ended last (their events go with
      // them), and always the newest submission: job numbers continue after it.
      {&prune_finished_jobs,
       "DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE finished = 1"
       " ORDER BY ended_unix DESC, rowid DESC LIMIT -1 OFFSET ?1)"
       " AND rowid <> (SELECT MAX(rowid) FROM jobs)"},
      {&unfinished_jobs, "SELECT id, generation FROM jobs WHERE finished = 0"},
      {&last_seq, "SELECT COALESCE(MAX(seq), 0) FROM events WHERE job_id = ?1"},
      {&all_jobs,
       "SELECT id, spec, state, reason, created_unix, started_unix, ended_unix, generation,"
       " size, resets, final_status, client_request_id FROM jobs ORDER BY rowid"},
      // Only for a job still running: a late checkpoint does not revive one.
      {&put_checkpoint,
       "INSERT OR REPLACE INTO checkpoints (job_id, status, planned_generation,"
       " planned_members, time_unix) SELECT ?1, ?2, ?3, ?4, ?5"
       " WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?1 AND finished = 0)"},
      {&drop_checkpoint, "DELETE FROM checkpoints WHERE job_id = ?1"},
      {&put_checkpoint_host,
       "INSERT INTO checkpoint_hosts (job_id, host, failures, cooldowns, last_failure,"
       " cooldown_until_unix) SELECT ?1, ?2, ?3, ?4, ?5, ?6"
       " WHERE EXISTS (SELECT 1 FROM checkpoints WHERE job_id = ?1)"},
      {&drop_checkpoint_hosts, "DELETE FROM checkpoint_hosts WHERE job_id = ?1"},
      {&get_checkpoint_hosts,
       "SELECT host, failures, cooldowns, last_failure, cooldown_until_unix"
       " FROM checkpoint_hosts WHERE job_id = ?1 ORDER BY host"},
      {&get_checkpoint,
       "SELECT status, planned_generation, planned_members FROM checkpoints WHERE job_id = ?1"},
      {&job_events,
       "SELECT seq, time_unix, kind, code, message, generation, state, size, reset_seconds"
       " FROM events WHERE job_id = ?1 ORDER BY seq"},
  };
  for (const auto& [slot, sql] : all) {
    HVDD_ASSIGN_OR_RETURN(auto statement, db.Prepare(sql));
    *slot = std::move(statement);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& state_dir,
                                                       JournalLimits limits) {
  HVDD_ASSIGN_OR_RETURN(auto journal, SqliteJournal::Open(state_dir, limits));
  return std::unique_ptr<Journal>(std::move(journal));
}

absl::StatusOr<std::unique_ptr<SqliteJournal>> SqliteJournal::Open(const std::string& state_dir,
                                                                   JournalLimits limits) {
  HVDD_RETURN_IF_ERROR(CheckJournalLimits(limits));
  HVDD_RETURN_IF_ERROR(CheckStateDir(state_dir));
  std::string path = state_dir;
  if (path.back() != '/') path += '/';
  path += kFileName;
  HVDD_RETURN_IF_ERROR(CreateDatabaseFile(path));
  auto db = SqliteDb::Open(path);
  if (!db.ok()) return OpenError(db.status());
  auto statements = std::make_unique<Statements>();
  absl::Status status = (*db)->Exec(
      "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
      " PRAGMA foreign_keys = ON;");
  if (status.ok()) status = EnsureSchema(**db);
  if (status.ok()) status = statements->Prepare(**db);
  if (!status.ok()) return OpenError(status);
  return std::unique_ptr<SqliteJournal>(
      new SqliteJournal(std::move(path), limits, std::move(*db), std::move(statements)));
}

SqliteJournal::SqliteJournal(std::string path, JournalLimits limits, std::unique_ptr<SqliteDb> db,
                             std::unique_ptr<Statements> statements)
    : path_(std::move(path)),
      limits_(limits),
      db_(std::move(db)),
      statements_(std::move(statements)) {}

SqliteJournal::~SqliteJournal() = default;

void SqliteJournal::NoteWrite(const absl::Status& status, const std::string& what) {
  if (!status.ok() && !writes_failing_) {
    HVDD_LOG(ERROR) << "journal: cannot record " << what << ": " << status.message()
                    << " (further failures are not logged until a write succeeds again)";
  } else if (status.ok() && writes_failing_) {
    HVDD_LOG(INFO) << "journal " << path_ << ": records are written again";
  }
  writes_failing_ = !status.ok();
}

void SqliteJournal::OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                                   absl::Time created, const std::string& client_request_id) {
  absl::MutexLock lock(&mu_);
  absl::Status status = statements_->insert_job->BindText(1, job_id)
                            .BindText(2, spec.name())
                            .BindBlob(3, spec.SerializeAsString())
                            .BindText(4, v1::JobState_Name(v1::PENDING))
                            .BindDouble(5, UnixSeconds(created))
                            .BindText(6, client_request_id)
                            .Run();
  if (status.ok()) stored_events_[job_id] = 0;
  NoteWrite(status, absl::StrCat("the submission of ", job_id));
}

void SqliteJournal::OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) {
  // Only what the job's row and events do not hold already.
  v1::JobStatus tables;
  *tables.mutable_workers() = status.workers();
  *tables.mutable_hosts() = status.hosts();
  *tables.mutable_reset_history() = status.reset_history();
  tables.set_last_commit(status.last_commit());
  // A cooldown's time left means nothing once the job is over.
  for (auto& host : *tables.mutable_hosts()) host.set_cooldown_seconds_left(0);
  absl::MutexLock lock(&mu_);
  NoteWrite(statements_->set_final_status->BindText(1, job_id)
                .BindBlob(2, tables.SerializeAsString())
                .Run(),
            absl::StrCat("the final status of ", job_id));
}

void SqliteJournal::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  // Output is the bulk of a job's events and only worth having while it runs.
  if (event.kind() == v1::JobEvent::OUTPUT) return;
  absl::MutexLock lock(&mu_);
  NoteWrite(InTransaction(
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return RecordEvent(job_id, event); }),
            absl::StrCat("event ", event.seq(), " of ", job_id));
}

absl::Status SqliteJournal::RecordEvent(const std::string& job_id, const v1::JobEvent& event) {
  Statements& s = *statements_;
  const bool has_state =
      event.kind() == v1::JobEvent::STATE || event.kind() == v1::JobEvent::JOB_ENDED;
  absl::Status status = s.insert_event->BindText(1, job_id)
                            .BindInt(2, static_cast<int64_t>(event.seq()))
                            .BindDouble(3, event.time_unix())
                            .BindText(4, v1::JobEvent::Kind_Name(event.kind()))
                            .BindText(5, event.code())
                            .BindText(6, event.message())
                            .BindInt(7, event.generation())
                            .BindText(8, has_state ? v1::JobState_Name(event.state()) : "")
                            .BindInt(9, event.size())
                            .BindDouble(10, event.reset_seconds())
                            .Run();
  if (status.ok()) {
    status = s.touch_job->BindText(1, job_id)
                 .BindDouble(2, event.time_unix())
                 .BindInt(3, event.generation())
                 .Run();
  }
  if (!status.ok()) return status;
  switch (event.kind()) {
    case v1::JobEvent::STATE:
      status = s.set_state->BindText(1, job_id)
                   .BindText(2, v1::JobState_Name(event.state()))
                   .BindDouble(3, IsTerminal(event.state()) ? event.time_unix() : 0.0)
                   .Run();
      break;
    case v1::JobEvent::MEMBERSHIP:
      status = s.set_membership->BindText(1, job_id)
                   .BindInt(2, event.generation())
                   .BindInt(3, event.size())
                   .Run();
      break;
    case v1::JobEvent::JOB_ENDED:
      // Nothing follows: trim the job to its final size, then the finished jobs.
      stored_events_.erase(job_id);
      status = s.drop_checkpoint_hosts->BindText(1, job_id).Run();
      if (status.ok()) status = s.drop_checkpoint->BindText(1, job_id).Run();
      if (!status.ok()) return status;
      status = s.set_ended->BindText(1, job_id)
                   .BindText(2, v1::JobState_Name(event.state()))
                   .BindText(3, event.message())
                   .BindInt(4, event.generation())
                   .BindDouble(5, event.time_unix())
                   .Run();
      if (status.ok()) {
        status = s.prune_events->BindText(1, job_id).BindInt(2, limits_.max_events_per_job).Run();
      }
      if (status.ok()) status = s.prune_finished_jobs->BindInt(1, limits_.max_finished_jobs).Run();
      return status;
    default:
      break;
  }
  if (!status.ok()) return status;
  int64_t& stored = stored_events_[job_id];
  if (++stored > limits_.max_events_per_job) {
    status = s.prune_events->BindText(1, job_id).BindInt(2, limits_.max_events_per_job).Run();
    stored = limits_.max_events_per_job;
  }
  return status;
}

absl::StatusOr<std::vector<ArchivedJob>> SqliteJournal::ReadAll() {
  std::vector<ArchivedJob> jobs;
  auto status = ForEachRow(*statements_->all_jobs, [&](SqliteStatement& row) {
    ArchivedJob job;
    v1::JobStatus& s = job.status;
    s.set_job_id(row.Text(0));
    if (!s.mutable_spec()->ParseFromString(row.Blob(1))) {
      return absl::DataLossError(
          absl::StrCat("journal ", path_, ": the spec of ", s.job_id(), " cannot be read"));
    }
    s.set_state(ParseState(row.Text(2)));
    s.set_reason(row.Text(3));
    s.set_created_unix(row.Double(4));
    s.set_started_unix(row.Double(5));
    s.set_ended_unix(row.Double(6));
    s.set_generation(row.Int(7));
    s.set_size(static_cast<int32_t>(row.Int(8)));
    s.set_resets(static_cast<int32_t>(row.Int(9)));
    s.set_min_np(s.spec().min_np());
    s.set_max_np(s.spec().max_np());
    // Empty for a job that did not end in this journal's keeping (version 1
    // files, jobs that were running when horovodd stopped).
    v1::JobStatus tables;
    if (!tables.ParseFromString(row.Blob(10))) {
      return absl::DataLossError(
          absl::StrCat("journal ", path_, ": the final status of ", s.job_id(), " cannot be read"));
    }
    *s.mutable_workers() = std::move(*tables.mutable_workers());
    *s.mutable_hosts() = std::move(*tables.mutable_hosts());
    *s.mutable_reset_history() = std::move(*tables.mutable_reset_history());
    s.set_last_commit(tables.last_commit());
    s.set_client_request_id(row.Text(11));
    jobs.push_back(std::move(job));
    return absl::OkStatus();
  });
  for (auto& job : jobs) {
    if (!status.ok()) break;
    statements_->job_events->BindText(1, job.status.job_id());
    status = ForEachRow(*statements_->job_events, [&](SqliteStatement& row) {
      v1::JobEvent& e = job.events.emplace_back();
      e.set_seq(static_cast<uint64_t>(row.Int(0)));
      e.set_time_unix(row.Double(1));
      e.set_kind(ParseKind(row.Text(2)));
      e.set_code(row.Text(3));
      e.set_message(row.Text(4));
      e.set_generation(row.Int(5));
      e.set_state(ParseState(row.Text(6)));
      e.set_size(static_cast<int32_t>(row.Int(7)));
      e.set_reset_seconds(row.Double(8));
      return absl::OkStatus();
    });
    const size_t recent = std::min(job.events.size(), kRecentEvents);
    for (size_t i = job.events.size() - recent; i < job.events.size(); ++i) {
      *job.status.add_recent_events() = job.events[i];
    }
  }
  if (!status.ok()) return RecoveryError(status);
  return jobs;
}

}  // namespace horovodd::daemon
