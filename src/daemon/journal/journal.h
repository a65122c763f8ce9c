// The daemon's durable records: every job's spec, state and events (worker
// output excepted), the final status of ended jobs and the newest checkpoint
// of running ones (with their hosts' cooldowns), so that a restarted horovodd
// (or, with etcd, another one) still lists the jobs an earlier run had, takes
// back the ones still running and says what became of the others.
//
// Two stores keep them: an SQLite database under the state dir (the embedded
// default, SqliteJournal) and etcd (EtcdJournal, daemon/etcd_journal), which
// several daemons share. Both record the same things and recover them alike;
// the journal tests run against each.
//
// Threading: the observer callbacks come from every job's driver thread; an
// implementation serialises them itself.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/job_events/job_observer.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// A job an earlier run of the daemon recorded. `events` are in seq order;
// the last one is the JOB_ENDED event.
struct ArchivedJob {
  v1::JobStatus status;
  std::vector<v1::JobEvent> events;
};

// A job an earlier run was running when it stopped, with what taking it
// back needs (JobDriver::Resume).
struct ResumableJob {
  std::string job_id;
  v1::JobSpec spec;
  absl::Time created;
  std::string client_request_id;  // its submission's ("" for none)
  JobCheckpoint checkpoint;
};

// How much the journal keeps; the oldest records beyond these go first.
struct JournalLimits {
  int max_events_per_job = 5000;
  int max_finished_jobs = 1000;
};

class Journal : public JobObserver {
 public:
  // The SQLite database file inside the state dir.
  static constexpr const char* kFileName = "horovodd.db";
  // Why a job that had not ended when the daemon stopped is recorded as
  // FAILED: workers get PDEATHSIG, so a killed daemon takes them with it.
  static constexpr const char* kStoppedReason =
      "horovodd stopped while the job was running; its workers were stopped with it";

  // The embedded store: opens (creates) <state_dir>/horovodd.db (SqliteJournal::Open).
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& state_dir,
                                                       JournalLimits limits = {});

  ~Journal() override = default;

  // Jobs an earlier run recorded, oldest first. Jobs that had not ended are
  // returned (and re-recorded) as FAILED with kStoppedReason, except, when
  // `running` is given, those with a checkpoint: they go to `running`
  // instead, untouched, for the daemon to take back (their workers run
  // under shims that outlived it).
  virtual absl::StatusOr<std::vector<ArchivedJob>> Recover(
      std::vector<ResumableJob>* running = nullptr) = 0;

  // Where the records are, for messages: a file's path, or etcd's endpoints and prefix.
  virtual std::string Describe() const = 0;

  // Whether new records can be made now: the daemon refuses submits and
  // membership changes otherwise (running jobs go on; their records catch
  // up). FAILED_PRECONDITION naming the store when not (not UNAVAILABLE:
  // clients take that for a daemon they could not reach). The embedded
  // store always can.
  virtual absl::Status Writable() { return absl::OkStatus(); }
};

// What both stores check of their limits: INVALID_ARGUMENT below 1.
absl::Status CheckJournalLimits(const JournalLimits& limits);

// The last step of both stores' Recover: the jobs of `all` that have a
// checkpoint (by job id) move to `running` as ResumableJobs; the rest are
// returned, in their order. `running` may be null only when `checkpoints` is empty.
std::vector<ArchivedJob> SplitOffResumable(std::vector<ArchivedJob> all,
                                           std::map<std::string, JobCheckpoint> checkpoints,
                                           std::vector<ResumableJob>* running);

}  // namespace horovodd::daemon
