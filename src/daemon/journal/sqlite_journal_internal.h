// What sqlite_journal.cc and sqlite_journal_checkpoints.cc share: the prepared
// statements (prepared once in Open, used under SqliteJournal::mu_) and the row and
// time helpers. Not part of the journal's interface.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/journal/journal_sqlite.h"
#include "daemon/journal/sqlite_journal.h"

namespace horovodd::daemon {

struct SqliteJournal::Statements {
  std::unique_ptr<SqliteStatement> begin, commit, rollback;
  std::unique_ptr<SqliteStatement> insert_job, insert_event;
  std::unique_ptr<SqliteStatement> touch_job, set_state, set_membership, set_ended;
  std::unique_ptr<SqliteStatement> set_final_status;
  std::unique_ptr<SqliteStatement> prune_events, prune_finished_jobs;
  std::unique_ptr<SqliteStatement> unfinished_jobs, last_seq, all_jobs, job_events;
  std::unique_ptr<SqliteStatement> put_checkpoint, drop_checkpoint, get_checkpoint;
  std::unique_ptr<SqliteStatement> put_checkpoint_host, drop_checkpoint_hosts, get_checkpoint_hosts;

  absl::Status Prepare(SqliteDb& db);
};

// Defined here: both files run transactions.
template <typename Body>
absl::Status SqliteJournal::InTransaction(Body body) {
  HVDD_RETURN_IF_ERROR(statements_->begin->Run());
  absl::Status status = body();
  if (status.ok()) status = statements_->commit->Run();
  if (!status.ok()) statements_->rollback->Run().IgnoreError();
  return status;
}

namespace journal_internal {

// The checkpoints table (schema 3) and its hosts' cooldowns (schema 4),
// defined in sqlite_journal_checkpoints.cc.
extern const char* const kCheckpointsTable;
extern const char* const kCheckpointHostsTable;

inline double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// Steps `query` through its rows, calling `fn(query)` for each; resets it.
template <typename Fn>
absl::Status ForEachRow(SqliteStatement& query, Fn fn) {
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) {
      status = row.status();
    } else if (!*row) {
      break;
    } else {
      status = fn(query);
    }
  }
  query.Reset();
  return status;
}

// Says that it failed while recovering.
absl::Status RecoveryError(const absl::Status& status);

}  // namespace journal_internal
}  // namespace horovodd::daemon
