// The replicated journal store: the records (see Journal) in etcd, under a
// prefix, so that every horovodd of an HA setup reads the same jobs and a
// standby that becomes leader takes the running ones back.
//
// Keys under the prefix (values in etcd_records.proto):
//   version                 the layout's version ("1")
//   jobs/<job id>           JobRecord: the job's row
//   events/<job id>/<seq>   horovodd.v1.JobEvent, seq zero-padded to 20 digits
//   checkpoints/<job id>    CheckpointRecord: a running job's newest checkpoint
// Each callback is one etcd transaction (its event, its row, what it prunes).
//
// Fencing: once SetFence is given a compare (the leader key still held by
// this daemon's lease), every write carries it; a write it fails is not made,
// and the fence's owner is told (it steps down). So a deposed leader cannot
// write a record.
//
// The rows and each running job's stored event seqs are kept in memory too
// (loaded by Open and Recover): a write that fails (etcd without quorum) is
// retried in full with the job's next write, so its row catches up.
//
// Threading: one mutex serialises the callbacks and recovery.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/etcd_client/etcd_client.h"
#include "daemon/journal/journal.h"
#include "etcd_records.pb.h"

namespace horovodd::daemon {

class EtcdJournal final : public Journal {
 public:
  static constexpr const char* kDefaultPrefix = "/horovodd/";

  // Reads the rows under `prefix` (which ends in '/'); UNAVAILABLE naming
  // etcd when no member answers, FAILED_PRECONDITION for records of a newer
  // layout, INVALID_ARGUMENT for bad limits or prefix.
  static absl::StatusOr<std::unique_ptr<EtcdJournal>> Open(std::shared_ptr<EtcdClient> etcd,
                                                           std::string prefix,
                                                           JournalLimits limits = {});
  ~EtcdJournal() override;

  absl::StatusOr<std::vector<ArchivedJob>> Recover(
      std::vector<ResumableJob>* running = nullptr) override ABSL_LOCKS_EXCLUDED(mu_);
  std::string Describe() const override;

  // Every job as recorded now, without changing anything (running ones as
  // they are, not FAILED): what a standby shows.
  absl::StatusOr<std::vector<ArchivedJob>> ReadAll() ABSL_LOCKS_EXCLUDED(mu_);

  // From now on every write also needs `compare` to hold; `on_refused` runs
  // (on the writer's thread, without the journal's lock) when one did not.
  void SetFence(etcdserverpb::Compare compare, std::function<void()> on_refused)
      ABSL_LOCKS_EXCLUDED(mu_);

  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                      absl::Time created) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) override
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& prefix() const { return prefix_; }

 private:
  struct Job {
    journal::JobRecord record;
    int64_t created_revision = 0;  // etcd's: the order of submission
    // Seqs of its stored events, oldest first; loaded on first use.
    std::optional<std::deque<uint64_t>> event_seqs;
  };
  using Ops = std::vector<etcdserverpb::RequestOp>;

  EtcdJournal(std::shared_ptr<EtcdClient> etcd, std::string prefix, JournalLimits limits);

  std::string JobKey(const std::string& job_id) const;
  std::string EventsPrefix(const std::string& job_id) const;
  std::string EventKey(const std::string& job_id, uint64_t seq) const;
  std::string CheckpointKey(const std::string& job_id) const;

  absl::Status CheckVersion() ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces jobs_ with the rows in etcd.
  absl::Status LoadJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::deque<uint64_t>*> EventSeqs(const std::string& job_id, Job& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ops recording `event` (and what it prunes), applied to jobs_.
  absl::StatusOr<Ops> RecordEvent(const std::string& job_id, const v1::JobEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes of the finished jobs past the limit; forgets them in jobs_.
  Ops PruneFinishedJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<JobCheckpoint>> ReadCheckpoint(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<ArchivedJob>> ReadAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One transaction (or, past etcd's limit on ops, several), fenced.
  absl::Status Commit(Ops ops, int64_t* revision = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls on_refused_ after a write the fence refused; logs failures as SqliteJournal does.
  void NoteWrite(const absl::Status& status, const std::string& what) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string prefix_;
  const JournalLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::optional<etcdserverpb::Compare> fence_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_refused_ ABSL_GUARDED_BY(mu_);
  bool writes_failing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::daemon
