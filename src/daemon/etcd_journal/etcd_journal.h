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
// (loaded by Open and Recover).
//
// etcd faults (a member lost, the quorum lost): a write no member could make
// is kept, in order, and from then on the callbacks only queue their writes
// (without calling etcd) while a background thread retries the queue every
// kRetryInterval; once it is written, writes go to etcd directly again. So a
// job's driver thread waits on etcd at most one call's deadline when the
// quorum goes, not once per record, and what happened meanwhile (the end of
// a job too) is written when the quorum returns. Writable() tells the
// daemon to refuse new work meanwhile.
//
// Threading: one mutex serialises the callbacks and recovery; the retrying
// thread calls etcd without it.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/etcd_client/etcd_client.h"
#include "daemon/journal/journal.h"
#include "etcd_records.pb.h"

namespace horovodd::daemon {

class EtcdJournal final : public Journal {
 public:
  static constexpr const char* kDefaultPrefix = "/horovodd/";
  // How often queued writes are tried again while etcd cannot take them.
  static constexpr absl::Duration kRetryInterval = absl::Milliseconds(500);

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
  // FAILED_PRECONDITION "etcd store unavailable (quorum lost?): ..." while
  // writes are queued, or when a quorum read fails (within the client's
  // call deadline); OK otherwise. A fence refusal is not this: that is
  // SetFence's on_refused.
  absl::Status Writable() override ABSL_LOCKS_EXCLUDED(mu_);

  // Every job as recorded now, without changing anything (running ones as
  // they are, not FAILED): what a standby shows.
  absl::StatusOr<std::vector<ArchivedJob>> ReadAll() ABSL_LOCKS_EXCLUDED(mu_);

  // From now on every write also needs `compare` to hold; `on_refused` runs
  // (on the writer's thread, without the journal's lock) when one did not.
  void SetFence(etcdserverpb::Compare compare, std::function<void()> on_refused)
      ABSL_LOCKS_EXCLUDED(mu_);

  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec, absl::Time created,
                      const std::string& client_request_id) override ABSL_LOCKS_EXCLUDED(mu_);
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
  // One transaction (or, past etcd's limit on ops, several), fenced by `fence`.
  absl::Status CommitFenced(Ops ops, const std::optional<etcdserverpb::Compare>& fence,
                            int64_t* revision = nullptr);
  absl::Status Commit(Ops ops, int64_t* revision = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A callback's write: committed now, or queued while earlier ones wait
  // (see the class comment). An error means not written yet (or, the fence's
  // FAILED_PRECONDITION, never).
  absl::Status Write(Ops ops, int64_t* revision = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `ops` to the queue; drops earlier queued puts of the keys it puts.
  void Enqueue(Ops ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The retrying thread: writes the queue, oldest first, until stopped.
  void RetryLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Calls on_refused_ after a write the fence refused.
  void NoteWrite(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StoreUnavailable(const absl::Status& cause) const;

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string prefix_;
  const JournalLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::optional<etcdserverpb::Compare> fence_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_refused_ ABSL_GUARDED_BY(mu_);
  // Set while writes are queued: the first failure, for messages.
  bool writes_failing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status store_error_ ABSL_GUARDED_BY(mu_);
  // Writes not made yet, one transaction's ops each, oldest first; the
  // front one is being written when front_in_flight_.
  std::deque<Ops> queued_ ABSL_GUARDED_BY(mu_);
  bool front_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stop_;
  std::thread retrier_;
};

}  // namespace horovodd::daemon
