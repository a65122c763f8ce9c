// SqliteJournal: the checkpoints of running jobs (schema 3) and recovery, which
// hands the jobs a restarted daemon takes back to it and records the others
// as stopped.
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "daemon/journal/journal_sqlite.h"
#include "daemon/journal/sqlite_journal.h"
#include "daemon/journal/sqlite_journal_internal.h"

namespace horovodd::daemon {
namespace journal_internal {

// One row per running job: its newest JobCheckpoint. Gone once it ended.
const char* const kCheckpointsTable = R"sql(
CREATE TABLE checkpoints (
  job_id TEXT NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  status BLOB NOT NULL,                   -- horovodd.v1.JobStatus: workers, hosts, resets
  planned_generation INTEGER NOT NULL,
  planned_members TEXT NOT NULL,          -- its worker ids in rank order: "3,1,2"
  time_unix REAL NOT NULL
);
)sql";

// The failure history of a running job's hosts (HostCooldown), as of its
// checkpoint; only hosts that failed at least once.
const char* const kCheckpointHostsTable = R"sql(
CREATE TABLE checkpoint_hosts (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  host TEXT NOT NULL,
  failures INTEGER NOT NULL,
  cooldowns INTEGER NOT NULL,             -- times blacklisted: the back-off's n
  last_failure TEXT NOT NULL,
  cooldown_until_unix REAL NOT NULL,      -- 0: none running; -1: blacklisted for good
  PRIMARY KEY (job_id, host)
) WITHOUT ROWID;
)sql";

absl::Status RecoveryError(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("journal recovery: ", status.message()));
}

}  // namespace journal_internal

using journal_internal::ForEachRow;
using journal_internal::RecoveryError;
using journal_internal::UnixSeconds;

namespace {

constexpr double kNoCooldown = 0;
constexpr double kBlacklistedForGood = -1;

double CooldownUntilColumn(absl::Time until) {
  if (until == absl::InfinitePast()) return kNoCooldown;
  if (until == absl::InfiniteFuture()) return kBlacklistedForGood;
  return UnixSeconds(until);
}

absl::Time CooldownUntilOf(double column) {
  if (column == kBlacklistedForGood) return absl::InfiniteFuture();
  if (column <= kNoCooldown) return absl::InfinitePast();
  return absl::FromUnixMicros(static_cast<int64_t>(column * 1e6));
}

}  // namespace

void SqliteJournal::OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  NoteWrite(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
              Statements& s = *statements_;
              HVDD_RETURN_IF_ERROR(s.put_checkpoint->BindText(1, job_id)
                                       .BindBlob(2, checkpoint.status.SerializeAsString())
                                       .BindInt(3, checkpoint.planned_generation)
                                       .BindText(4, absl::StrJoin(checkpoint.planned_members, ","))
                                       .BindDouble(5, UnixSeconds(absl::Now()))
                                       .Run());
              HVDD_RETURN_IF_ERROR(s.drop_checkpoint_hosts->BindText(1, job_id).Run());
              for (const HostCooldown& c : checkpoint.host_cooldowns) {
                HVDD_RETURN_IF_ERROR(s.put_checkpoint_host->BindText(1, job_id)
                                         .BindText(2, c.host)
                                         .BindInt(3, c.failures)
                                         .BindInt(4, c.cooldowns)
                                         .BindText(5, c.last_failure)
                                         .BindDouble(6, CooldownUntilColumn(c.until))
                                         .Run());
              }
              return absl::OkStatus();
            }),
            absl::StrCat("the checkpoint of ", job_id));
}

absl::StatusOr<std::optional<JobCheckpoint>> SqliteJournal::ReadCheckpoint(
    const std::string& job_id) {
  std::optional<JobCheckpoint> checkpoint;
  statements_->get_checkpoint->BindText(1, job_id);
  auto status = ForEachRow(*statements_->get_checkpoint, [&](SqliteStatement& row) {
    JobCheckpoint c;
    if (!c.status.ParseFromString(row.Blob(0))) {
      return absl::DataLossError(
          absl::StrCat("journal ", path_, ": the checkpoint of ", job_id, " cannot be read"));
    }
    c.planned_generation = row.Int(1);
    for (absl::string_view id : absl::StrSplit(row.Text(2), ',', absl::SkipEmpty())) {
      int64_t member = 0;
      if (!absl::SimpleAtoi(id, &member)) {
        return absl::DataLossError(absl::StrCat("journal ", path_, ": the checkpoint of ", job_id,
                                                " names worker '", id, "'"));
      }
      c.planned_members.push_back(member);
    }
    checkpoint = std::move(c);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (checkpoint.has_value()) {
    statements_->get_checkpoint_hosts->BindText(1, job_id);
    status = ForEachRow(*statements_->get_checkpoint_hosts, [&](SqliteStatement& row) {
      HostCooldown& c = checkpoint->host_cooldowns.emplace_back();
      c.host = row.Text(0);
      c.failures = static_cast<int>(row.Int(1));
      c.cooldowns = static_cast<int>(row.Int(2));
      c.last_failure = row.Text(3);
      c.until = CooldownUntilOf(row.Double(4));
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    statements_->last_seq->BindText(1, job_id);
    status = ForEachRow(*statements_->last_seq, [&](SqliteStatement& row) {
      checkpoint->last_event_seq = static_cast<uint64_t>(row.Int(0));
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
  }
  return checkpoint;
}

absl::Status SqliteJournal::MarkStopped(const std::string& job_id, int64_t generation) {
  int64_t last_seq = 0;
  statements_->last_seq->BindText(1, job_id);
  auto status = ForEachRow(*statements_->last_seq, [&](SqliteStatement& row) {
    last_seq = row.Int(0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  v1::JobEvent end;
  end.set_seq(static_cast<uint64_t>(last_seq) + 1);
  end.set_time_unix(UnixSeconds(absl::Now()));
  end.set_kind(v1::JobEvent::JOB_ENDED);
  end.set_state(v1::FAILED);
  end.set_message(kStoppedReason);
  end.set_generation(generation);
  return RecordEvent(job_id, end);
}

absl::StatusOr<std::vector<ArchivedJob>> SqliteJournal::Recover(
    std::vector<ResumableJob>* running) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, int64_t>> unfinished;
  auto status = ForEachRow(*statements_->unfinished_jobs, [&](SqliteStatement& row) {
    unfinished.emplace_back(row.Text(0), row.Int(1));
    return absl::OkStatus();
  });
  std::map<std::string, JobCheckpoint> resumable;
  for (const auto& [id, stopped_generation] : unfinished) {
    if (!status.ok()) break;
    // Named copies: a lambda cannot capture structured bindings in C++17.
    const std::string& job_id = id;
    const int64_t generation = stopped_generation;
    if (running != nullptr) {
      absl::StatusOr<std::optional<JobCheckpoint>> checkpoint = ReadCheckpoint(job_id);
      if (!checkpoint.ok()) {
        status = checkpoint.status();
        break;
      }
      if (checkpoint->has_value()) {
        // Its workers may still run under their shims: the daemon takes it back.
        resumable[job_id] = std::move(**checkpoint);
        stored_events_[job_id] = 0;
        continue;
      }
    }
    status = InTransaction(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return MarkStopped(job_id, generation); });
    if (status.ok()) {
      HVDD_LOG(WARNING) << "journal: " << job_id
                        << " was running when horovodd stopped; recorded as FAILED";
    }
  }
  // The limit may be lower than the run that wrote these had.
  if (status.ok()) {
    status = statements_->prune_finished_jobs->BindInt(1, limits_.max_finished_jobs).Run();
  }
  if (!status.ok()) return RecoveryError(status);
  absl::StatusOr<std::vector<ArchivedJob>> all = ReadAll();
  if (!all.ok()) return all;
  return SplitOffResumable(*std::move(all), std::move(resumable), running);
}

}  // namespace horovodd::daemon
