// What a job's resets were: how many, when each was detected, when its
// generation formed and when training resumed (ResetRecord, in JobStatus),
// and the newest commit any worker reported.
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class ResetHistory {
 public:
  // Records kept; older ones are dropped (status stays bounded).
  static constexpr size_t kMaxRecords = 100;

  // Something broke or changed at `now`: the running reset (if none is
  // running yet) counts from here. Later calls keep the first time.
  void Detected(absl::Time now);
  bool reset_running() const { return detected_.has_value(); }

  // Generation `generation` was planned to replace a running one, for
  // `cause`: one more reset, and its record.
  void Began(int64_t generation, const std::string& cause, absl::Time now);
  // Generation `generation` was planned before the one the running reset
  // planned had formed (a worker failed meanwhile, say): the same reset goes
  // on, its record names the newer generation. As in Horovod, a reset is
  // counted once per round, however many plans it took.
  void Replanned(int64_t generation);
  // Generation `generation` formed at `now`: the running reset is over. How
  // long it took since it was detected, if one was running.
  std::optional<absl::Duration> Ready(int64_t generation, absl::Time now);
  // A worker committed `commit` in `generation`: the first commit of a
  // generation that formed after a reset marks when training resumed.
  void Committed(int64_t generation, int64_t commit, absl::Time now);

  // A job taken back after a daemon restart: what the earlier run counted.
  void Restore(int resets, int64_t last_commit, std::deque<v1::ResetRecord> records) {
    resets_ = resets;
    last_commit_ = last_commit;
    records_ = std::move(records);
  }

  int resets() const { return resets_; }
  int64_t last_commit() const { return last_commit_; }
  const std::deque<v1::ResetRecord>& records() const { return records_; }  // newest last

 private:
  int resets_ = 0;
  int64_t last_commit_ = 0;
  std::deque<v1::ResetRecord> records_;
  std::optional<absl::Time> detected_;  // when the running reset began
};

}  // namespace horovodd::daemon
