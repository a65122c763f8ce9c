#include "daemon/etcd_journal/etcd_journal.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

constexpr const char* kLayoutVersion = "1";
// As many as a live job's status shows.
constexpr size_t kRecentEvents = 20;
// Keys read per range request, so that no answer nears gRPC's message limit.
constexpr int64_t kRangePage = 200;

constexpr double kNoCooldown = 0;
constexpr double kBlacklistedForGood = -1;

bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

etcdserverpb::RequestOp PutOp(const std::string& key, const std::string& value) {
  etcdserverpb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(value);
  return op;
}

etcdserverpb::RequestOp DeleteOp(const std::string& key, const std::string& range_end = "") {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  if (!range_end.empty()) op.mutable_request_delete_range()->set_range_end(range_end);
  return op;
}

// Every key in [key, range_end), in key order, page by page.
absl::StatusOr<std::vector<mvccpb::KeyValue>> RangeAll(EtcdClient& etcd, const std::string& key,
                                                       const std::string& range_end,
                                                       bool keys_only) {
  std::vector<mvccpb::KeyValue> all;
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  request.set_limit(kRangePage);
  request.set_keys_only(keys_only);
  int64_t revision = 0;  // every page from one revision: a consistent read
  while (true) {
    request.set_revision(revision);
    HVDD_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, etcd.Range(request));
    revision = response.header().revision();
    for (auto& kv : *response.mutable_kvs()) all.push_back(std::move(kv));
    if (!response.more() || response.kvs_size() == 0) break;
    request.set_key(all.back().key() + std::string(1, '\0'));
  }
  return all;
}

// The event as SqliteJournal keeps it: the fields a journal records.
v1::JobEvent Recorded(const v1::JobEvent& event) {
  v1::JobEvent e;
  e.set_seq(event.seq());
  e.set_time_unix(event.time_unix());
  e.set_kind(event.kind());
  e.set_code(event.code());
  e.set_message(event.message());
  e.set_generation(event.generation());
  if (event.kind() == v1::JobEvent::STATE || event.kind() == v1::JobEvent::JOB_ENDED) {
    e.set_state(event.state());
  }
  e.set_size(event.size());
  e.set_reset_seconds(event.reset_seconds());
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdJournal>> EtcdJournal::Open(std::shared_ptr<EtcdClient> etcd,
                                                               std::string prefix,
                                                               JournalLimits limits) {
  HVDD_RETURN_IF_ERROR(CheckJournalLimits(limits));
  if (prefix.empty() || prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd journal prefix '", prefix, "' must end in '/'"));
  }
  std::unique_ptr<EtcdJournal> journal(new EtcdJournal(std::move(etcd), std::move(prefix), limits));
  HVDD_RETURN_IF_ERROR(journal->CheckVersion());
  {
    absl::MutexLock lock(&journal->mu_);
    HVDD_RETURN_IF_ERROR(journal->LoadJobs());
  }
  EtcdJournal* self = journal.get();
  journal->retrier_ = std::thread([self] { self->RetryLoop(); });
  return journal;
}

EtcdJournal::EtcdJournal(std::shared_ptr<EtcdClient> etcd, std::string prefix, JournalLimits limits)
    : etcd_(std::move(etcd)), prefix_(std::move(prefix)), limits_(limits) {}

EtcdJournal::~EtcdJournal() {
  stop_.Notify();
  if (retrier_.joinable()) retrier_.join();
  absl::MutexLock lock(&mu_);
  if (!queued_.empty()) {
    HVDD_LOG(ERROR) << "journal " << Describe() << ": " << queued_.size()
                    << " writes could not be made before horovodd stopped: "
                    << store_error_.message();
  }
}

std::string EtcdJournal::Describe() const {
  return absl::StrCat(etcd_->Describe(), ", prefix ", prefix_);
}

std::string EtcdJournal::JobKey(const std::string& job_id) const {
  return absl::StrCat(prefix_, "jobs/", job_id);
}
std::string EtcdJournal::EventsPrefix(const std::string& job_id) const {
  return absl::StrCat(prefix_, "events/", job_id, "/");
}
std::string EtcdJournal::EventKey(const std::string& job_id, uint64_t seq) const {
  return absl::StrCat(EventsPrefix(job_id), absl::StrFormat("%020u", seq));
}
std::string EtcdJournal::CheckpointKey(const std::string& job_id) const {
  return absl::StrCat(prefix_, "checkpoints/", job_id);
}

absl::Status EtcdJournal::CheckVersion() {
  // Written once, by whichever daemon opens the prefix first.
  const std::string key = prefix_ + "version";
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(key);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);
  *txn.add_success() = PutOp(key, kLayoutVersion);
  txn.add_failure()->mutable_request_range()->set_key(key);
  HVDD_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, etcd_->Txn(txn),
                        _.WithPrefix("journal"));
  if (response.succeeded()) return absl::OkStatus();
  const auto& range = response.responses(0).response_range();
  const std::string version = range.kvs_size() > 0 ? range.kvs(0).value() : "";
  int64_t number = 0;
  if (!absl::SimpleAtoi(version, &number) || number < 1) {
    return absl::DataLossError(absl::StrCat("journal ", Describe(), ": ", key, " is '", version,
                                            "', not a layout version"));
  }
  if (number > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", Describe(), " was written by a newer horovodd (layout version ",
                     number, "; this one reads version ", kLayoutVersion, ")"));
  }
  return absl::OkStatus();
}

absl::Status EtcdJournal::LoadJobs() {
  const std::string jobs_prefix = prefix_ + "jobs/";
  HVDD_ASSIGN_OR_RETURN(auto rows,
                        RangeAll(*etcd_, jobs_prefix, EtcdPrefixEnd(jobs_prefix), false),
                        _.WithPrefix("journal"));
  std::map<std::string, Job> jobs;
  for (const mvccpb::KeyValue& kv : rows) {
    Job job;
    if (!job.record.ParseFromString(kv.value())) {
      return absl::DataLossError(
          absl::StrCat("journal ", Describe(), ": ", kv.key(), " cannot be read"));
    }
    job.created_revision = kv.create_revision();
    jobs[job.record.status().job_id()] = std::move(job);
  }
  jobs_ = std::move(jobs);
  return absl::OkStatus();
}

absl::StatusOr<std::deque<uint64_t>*> EtcdJournal::EventSeqs(const std::string& job_id, Job& job) {
  if (!job.event_seqs.has_value()) {
    const std::string events = EventsPrefix(job_id);
    HVDD_ASSIGN_OR_RETURN(auto keys, RangeAll(*etcd_, events, EtcdPrefixEnd(events), true));
    std::deque<uint64_t> seqs;
    for (const mvccpb::KeyValue& kv : keys) {
      uint64_t seq = 0;
      if (absl::SimpleAtoi(absl::string_view(kv.key()).substr(events.size()), &seq)) {
        seqs.push_back(seq);
      }
    }
    job.event_seqs = std::move(seqs);
  }
  return &*job.event_seqs;
}

void EtcdJournal::OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                                 absl::Time created, const std::string& client_request_id) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    Job job;
    v1::JobStatus& s = *job.record.mutable_status();
    s.set_job_id(job_id);
    *s.mutable_spec() = spec;
    s.set_state(v1::PENDING);
    s.set_created_unix(UnixSeconds(created));
    s.set_client_request_id(client_request_id);
    job.event_seqs.emplace();
    int64_t revision = 0;
    status = Write({PutOp(JobKey(job_id), job.record.SerializeAsString())}, &revision);
    job.created_revision = revision;
    jobs_[job_id] = std::move(job);
  }
  NoteWrite(status);
}

void EtcdJournal::OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) {
  absl::Status written;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    v1::JobStatus& s = *it->second.record.mutable_status();
    *s.mutable_workers() = status.workers();
    *s.mutable_hosts() = status.hosts();
    *s.mutable_reset_history() = status.reset_history();
    s.set_last_commit(status.last_commit());
    // A cooldown's time left means nothing once the job is over.
    for (auto& host : *s.mutable_hosts()) host.set_cooldown_seconds_left(0);
    written = Write({PutOp(JobKey(job_id), it->second.record.SerializeAsString())});
  }
  NoteWrite(written);
}

void EtcdJournal::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  // Output is the bulk of a job's events and only worth having while it runs.
  if (event.kind() == v1::JobEvent::OUTPUT) return;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Ops> ops = RecordEvent(job_id, event);
    if (!ops.ok()) {
      HVDD_LOG(ERROR) << "journal: cannot record event " << event.seq() << " of " << job_id
                      << " in " << Describe() << ": " << ops.status().message();
    }
    status = ops.ok() ? Write(std::move(*ops)) : ops.status();
  }
  NoteWrite(status);
}

absl::StatusOr<EtcdJournal::Ops> EtcdJournal::RecordEvent(const std::string& job_id,
                                                          const v1::JobEvent& event) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat(job_id, " has no record"));
  }
  Job& job = it->second;
  // While writes are queued etcd is not read: the seqs are loaded (the
  // queued events among them) once it answers again, and pruned then.
  std::deque<uint64_t>* seqs = nullptr;
  if (!writes_failing_ || job.event_seqs.has_value()) {
    HVDD_ASSIGN_OR_RETURN(seqs, EventSeqs(job_id, job));
  }
  Ops ops;
  ops.push_back(PutOp(EventKey(job_id, event.seq()), Recorded(event).SerializeAsString()));
  if (seqs != nullptr && (seqs->empty() || seqs->back() < event.seq())) {
    seqs->push_back(event.seq());
  }

  v1::JobStatus& s = *job.record.mutable_status();
  // Every event: the first one marks the start; each planned generation
  // after the first is a reset.
  if (s.started_unix() == 0) s.set_started_unix(event.time_unix());
  s.set_resets(std::max<int64_t>(s.resets(), event.generation() - 1));
  switch (event.kind()) {
    case v1::JobEvent::STATE:
      s.set_state(event.state());
      if (IsTerminal(event.state())) s.set_ended_unix(std::max(s.ended_unix(), event.time_unix()));
      break;
    case v1::JobEvent::MEMBERSHIP:
      s.set_generation(event.generation());
      s.set_size(event.size());
      break;
    case v1::JobEvent::JOB_ENDED:
      s.set_state(event.state());
      s.set_reason(event.message());
      s.set_generation(event.generation());
      if (s.ended_unix() == 0) s.set_ended_unix(event.time_unix());
      job.record.set_finished(true);
      ops.push_back(DeleteOp(CheckpointKey(job_id)));
      break;
    default:
      break;
  }
  if (seqs != nullptr && seqs->size() > static_cast<size_t>(limits_.max_events_per_job)) {
    while (seqs->size() > static_cast<size_t>(limits_.max_events_per_job)) seqs->pop_front();
    // Every event before the oldest one kept.
    ops.push_back(DeleteOp(EventsPrefix(job_id), EventKey(job_id, seqs->front())));
  }
  ops.push_back(PutOp(JobKey(job_id), job.record.SerializeAsString()));
  if (job.record.finished()) {
    Ops pruned = PruneFinishedJobs();
    for (auto& op : pruned) ops.push_back(std::move(op));
  }
  return ops;
}

EtcdJournal::Ops EtcdJournal::PruneFinishedJobs() {
  // Keeps the finished jobs that ended last, and always the newest
  // submission: job numbers continue after it.
  std::vector<std::pair<const std::string*, const Job*>> finished;
  int64_t newest = 0;
  for (const auto& [id, job] : jobs_) {
    newest = std::max(newest, job.created_revision);
    if (job.record.finished()) finished.emplace_back(&id, &job);
  }
  Ops ops;
  if (finished.size() <= static_cast<size_t>(limits_.max_finished_jobs)) return ops;
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) {
    const double ended_a = a.second->record.status().ended_unix();
    const double ended_b = b.second->record.status().ended_unix();
    if (ended_a != ended_b) return ended_a > ended_b;
    return a.second->created_revision > b.second->created_revision;
  });
  std::vector<std::string> forgotten;
  for (size_t i = limits_.max_finished_jobs; i < finished.size(); ++i) {
    if (finished[i].second->created_revision == newest) continue;
    const std::string& id = *finished[i].first;
    ops.push_back(DeleteOp(JobKey(id)));
    ops.push_back(DeleteOp(EventsPrefix(id), EtcdPrefixEnd(EventsPrefix(id))));
    ops.push_back(DeleteOp(CheckpointKey(id)));
    forgotten.push_back(id);
  }
  for (const std::string& id : forgotten) jobs_.erase(id);
  return ops;
}

void EtcdJournal::OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    // Only for a job still running: a late checkpoint does not revive one.
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || it->second.record.finished()) return;
    journal::CheckpointRecord record;
    *record.mutable_status() = checkpoint.status;
    record.set_planned_generation(checkpoint.planned_generation);
    for (int64_t member : checkpoint.planned_members) record.add_planned_members(member);
    for (const HostCooldown& c : checkpoint.host_cooldowns) {
      journal::HostCooldownRecord* host = record.add_hosts();
      host->set_host(c.host);
      host->set_failures(c.failures);
      host->set_cooldowns(c.cooldowns);
      host->set_last_failure(c.last_failure);
      host->set_cooldown_until_unix(c.until == absl::InfinitePast()     ? kNoCooldown
                                    : c.until == absl::InfiniteFuture() ? kBlacklistedForGood
                                                                        : UnixSeconds(c.until));
    }
    record.set_time_unix(UnixSeconds(absl::Now()));
    status = Write({PutOp(CheckpointKey(job_id), record.SerializeAsString())});
  }
  NoteWrite(status);
}

absl::StatusOr<std::optional<JobCheckpoint>> EtcdJournal::ReadCheckpoint(
    const std::string& job_id) {
  etcdserverpb::RangeRequest request;
  request.set_key(CheckpointKey(job_id));
  HVDD_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, etcd_->Range(request));
  if (response.kvs_size() == 0) return std::optional<JobCheckpoint>();
  journal::CheckpointRecord record;
  if (!record.ParseFromString(response.kvs(0).value())) {
    return absl::DataLossError(
        absl::StrCat("journal ", Describe(), ": the checkpoint of ", job_id, " cannot be read"));
  }
  JobCheckpoint c;
  c.status = std::move(*record.mutable_status());
  c.planned_generation = record.planned_generation();
  c.planned_members.assign(record.planned_members().begin(), record.planned_members().end());
  std::vector<journal::HostCooldownRecord> hosts(record.hosts().begin(), record.hosts().end());
  std::sort(hosts.begin(), hosts.end(),
            [](const auto& a, const auto& b) { return a.host() < b.host(); });
  for (const auto& host : hosts) {
    HostCooldown& h = c.host_cooldowns.emplace_back();
    h.host = host.host();
    h.failures = host.failures();
    h.cooldowns = host.cooldowns();
    h.last_failure = host.last_failure();
    const double until = host.cooldown_until_unix();
    h.until = until == kBlacklistedForGood ? absl::InfiniteFuture()
              : until <= kNoCooldown       ? absl::InfinitePast()
                                     : absl::FromUnixMicros(static_cast<int64_t>(until * 1e6));
  }
  return std::optional<JobCheckpoint>(std::move(c));
}

absl::StatusOr<std::vector<ArchivedJob>> EtcdJournal::Recover(std::vector<ResumableJob>* running) {
  absl::MutexLock lock(&mu_);
  auto recovery_error = [](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("journal recovery: ", status.message()));
  };
  // Another daemon may have led since this one opened the journal.
  if (auto status = LoadJobs(); !status.ok()) return recovery_error(status);
  std::vector<std::pair<int64_t, std::string>> unfinished;
  for (const auto& [id, job] : jobs_) {
    if (!job.record.finished()) unfinished.emplace_back(job.created_revision, id);
  }
  std::sort(unfinished.begin(), unfinished.end());
  std::map<std::string, JobCheckpoint> resumable;
  for (const auto& [revision, job_id] : unfinished) {
    Job& job = jobs_[job_id];
    auto seqs = EventSeqs(job_id, job);
    if (!seqs.ok()) return recovery_error(seqs.status());
    const uint64_t last_seq = (*seqs)->empty() ? 0 : (*seqs)->back();
    if (running != nullptr) {
      auto checkpoint = ReadCheckpoint(job_id);
      if (!checkpoint.ok()) return recovery_error(checkpoint.status());
      if (checkpoint->has_value()) {
        // Its workers may still run under their shims: the daemon takes it back.
        (*checkpoint)->last_event_seq = last_seq;
        resumable[job_id] = std::move(**checkpoint);
        continue;
      }
    }
    v1::JobEvent end;
    end.set_seq(last_seq + 1);
    end.set_time_unix(UnixSeconds(absl::Now()));
    end.set_kind(v1::JobEvent::JOB_ENDED);
    end.set_state(v1::FAILED);
    end.set_message(kStoppedReason);
    end.set_generation(job.record.status().generation());
    auto ops = RecordEvent(job_id, end);
    absl::Status status = ops.ok() ? Commit(std::move(*ops)) : ops.status();
    if (!status.ok()) return recovery_error(status);
    HVDD_LOG(WARNING) << "journal: " << job_id
                      << " was running when horovodd stopped; recorded as FAILED";
  }
  // The limit may be lower than the run that wrote these had.
  if (auto status = Commit(PruneFinishedJobs()); !status.ok()) return recovery_error(status);
  HVDD_ASSIGN_OR_RETURN(std::vector<ArchivedJob> all, ReadAllLocked());
  return SplitOffResumable(std::move(all), std::move(resumable), running);
}

absl::StatusOr<std::vector<ArchivedJob>> EtcdJournal::ReadAll() {
  absl::MutexLock lock(&mu_);
  HVDD_RETURN_IF_ERROR(LoadJobs());
  return ReadAllLocked();
}

absl::StatusOr<std::vector<ArchivedJob>> EtcdJournal::ReadAllLocked() {
  std::vector<const Job*> ordered;
  for (const auto& [id, job] : jobs_) ordered.push_back(&job);
  std::sort(ordered.begin(), ordered.end(),
            [](const Job* a, const Job* b) { return a->created_revision < b->created_revision; });
  std::vector<ArchivedJob> jobs;
  for (const Job* job : ordered) {
    ArchivedJob& archived = jobs.emplace_back();
    archived.status = job->record.status();
    v1::JobStatus& s = archived.status;
    s.set_min_np(s.spec().min_np());
    s.set_max_np(s.spec().max_np());
    const std::string events = EventsPrefix(s.job_id());
    HVDD_ASSIGN_OR_RETURN(auto rows, RangeAll(*etcd_, events, EtcdPrefixEnd(events), false),
                          _.WithPrefix("journal recovery"));
    for (const mvccpb::KeyValue& kv : rows) {
      if (!archived.events.emplace_back().ParseFromString(kv.value())) {
        return absl::DataLossError(
            absl::StrCat("journal recovery: ", Describe(), ": ", kv.key(), " cannot be read"));
      }
    }
    const size_t recent = std::min(archived.events.size(), kRecentEvents);
    for (size_t i = archived.events.size() - recent; i < archived.events.size(); ++i) {
      *s.add_recent_events() = archived.events[i];
    }
  }
  return jobs;
}

}  // namespace horovodd::daemon
