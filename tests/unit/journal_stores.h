// Shared by the journal's cases (test_journal.cc, test_journal_schema.cc):
// the stores a journal runs on (an SQLite journal in a state dir, an etcd
// journal under a prefix of its own on one three-member etcd cluster for the
// whole run), and the job they record.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/etcd_journal/etcd_journal.h"
#include "daemon/journal/journal.h"
#include "etcd_test_cluster.h"
#include "journal_test_support.h"

namespace horovodd::daemon::testing {

inline std::unique_ptr<Journal> OpenJournal(const TempDir& dir, JournalLimits limits = {}) {
  auto journal = Journal::Open(dir.path(), limits);
  INFO(journal.status().ToString());
  REQUIRE(journal.ok());
  return std::move(*journal);
}

// The stores the journal's cases run against (TEMPLATE_TEST_CASE's TestType):
// each instance is one empty store, reopened by every OpenJournal.
class SqliteStore {
 public:
  std::unique_ptr<Journal> Open(JournalLimits limits) { return OpenJournal(dir_, limits); }

 private:
  TempDir dir_;
};

class EtcdStore {
 public:
  EtcdStore() : prefix_(absl::StrCat("/hvdd-test/", ++instances_, "/")) {}
  std::unique_ptr<Journal> Open(JournalLimits limits) {
    auto journal = EtcdJournal::Open(Cluster().Client(), prefix_, limits);
    INFO(journal.status().ToString());
    REQUIRE(journal.ok());
    return std::move(*journal);
  }

 private:
  // Started by the first case that needs it, killed when the run ends.
  static hvdd_test::EtcdTestCluster& Cluster() {
    static hvdd_test::EtcdTestCluster cluster(3);
    return cluster;
  }
  static inline int instances_ = 0;
  const std::string prefix_;
};

inline std::unique_ptr<Journal> OpenJournal(SqliteStore& store, JournalLimits limits = {}) {
  return store.Open(limits);
}
inline std::unique_ptr<Journal> OpenJournal(EtcdStore& store, JournalLimits limits = {}) {
  return store.Open(limits);
}

// A TempDir or either store.
template <typename Store>
std::vector<ArchivedJob> RecoverFrom(Store& store, JournalLimits limits = {}) {
  auto journal = OpenJournal(store, limits);
  auto jobs = journal->Recover();
  INFO(jobs.status().ToString());
  REQUIRE(jobs.ok());
  return std::move(*jobs);
}

inline v1::JobSpec ElasticSpec() {
  v1::JobSpec spec;
  spec.add_argv("python3");
  spec.add_argv("train.py");
  spec.set_name("resnet");
  spec.set_num_proc(2);
  spec.set_min_np(2);
  spec.set_max_np(4);
  spec.set_elastic(true);
  (*spec.mutable_env())["LR"] = "0.1";
  spec.mutable_discovery()->set_script("/opt/discover.sh");
  return spec;
}

inline std::vector<uint64_t> Seqs(const std::vector<v1::JobEvent>& events) {
  std::vector<uint64_t> seqs;
  for (const auto& e : events) seqs.push_back(e.seq());
  return seqs;
}

inline std::vector<std::string> Ids(const std::vector<ArchivedJob>& jobs) {
  std::vector<std::string> ids;
  for (const auto& job : jobs) ids.push_back(job.status.job_id());
  return ids;
}

}  // namespace horovodd::daemon::testing
