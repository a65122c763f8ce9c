// The embedded journal store: the records (see Journal) in an SQLite
// database under the state dir, one machine's.
//
// Threading: the observer callbacks come from every job's driver thread; one
// mutex serialises all use of the connection. Writes are small transactions
// in WAL mode with synchronous=NORMAL: a daemon crash loses nothing committed,
// a power loss at most the last few records.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/journal/journal.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class SqliteDb;
class SqliteStatement;

class SqliteJournal final : public Journal {
 public:
  // Opens (creates) <state_dir>/horovodd.db; the directory must exist and be
  // writable. NOT_FOUND / FAILED_PRECONDITION / PERMISSION_DENIED for a bad
  // state dir, DATA_LOSS for a file that is not a usable database,
  // FAILED_PRECONDITION for one written by a newer horovodd.
  static absl::StatusOr<std::unique_ptr<SqliteJournal>> Open(const std::string& state_dir,
                                                             JournalLimits limits = {});
  ~SqliteJournal() override;

  absl::StatusOr<std::vector<ArchivedJob>> Recover(
      std::vector<ResumableJob>* running = nullptr) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string Describe() const override { return path_; }

  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec, absl::Time created,
                      const std::string& client_request_id) override ABSL_LOCKS_EXCLUDED(mu_);
  // Records every event but OUTPUT; keeps the job's row current.
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps its worker, host and reset tables, for the status of the archived job.
  void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps the job's newest checkpoint until it ends.
  void OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) override
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }

 private:
  struct Statements;

  SqliteJournal(std::string path, JournalLimits limits, std::unique_ptr<SqliteDb> db,
                std::unique_ptr<Statements> statements);

  // Each runs inside a transaction the caller owns.
  absl::Status RecordEvent(const std::string& job_id, const v1::JobEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MarkStopped(const std::string& job_id, int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<JobCheckpoint>> ReadCheckpoint(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<ArchivedJob>> ReadAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `body` in a transaction: committed if it succeeds, rolled back if not.
  template <typename Body>
  absl::Status InTransaction(Body body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs a failed write: the first of a run of failures, and the recovery.
  void NoteWrite(const absl::Status& status, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const JournalLimits limits_;
  absl::Mutex mu_;  // serialises all use of the connection
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  // Finalised before db_ closes.
  std::unique_ptr<Statements> statements_ ABSL_GUARDED_BY(mu_);
  // Running jobs' event rows.
  std::map<std::string, int64_t> stored_events_ ABSL_GUARDED_BY(mu_);
  bool writes_failing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::daemon
