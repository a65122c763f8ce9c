// Shared by the journal and archived-job tests: a state dir that is removed
// afterwards, and events shaped like the ones a job driver emits.
#pragma once

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "horovodd.pb.h"
#include "temp_dir.h"

namespace horovodd::daemon::testing {

// The journal's state dir: hvdd_test::TempDir, its path as the string Journal takes.
class TempDir : public hvdd_test::TempDir {
 public:
  TempDir() : hvdd_test::TempDir("hvdd-journal"), path_(hvdd_test::TempDir::path().string()) {}

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline v1::JobEvent MakeEvent(uint64_t seq, v1::JobEvent::Kind kind, double time_unix,
                              int64_t generation = 0, const std::string& message = "") {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_kind(kind);
  e.set_time_unix(time_unix);
  e.set_generation(generation);
  e.set_message(message.empty() ? v1::JobEvent::Kind_Name(kind) : message);
  return e;
}

inline v1::JobEvent StateEvent(uint64_t seq, v1::JobState state, double time_unix,
                               int64_t generation) {
  v1::JobEvent e = MakeEvent(seq, v1::JobEvent::STATE, time_unix, generation,
                             "job is " + v1::JobState_Name(state));
  e.set_state(state);
  return e;
}

inline v1::JobEvent EndEvent(uint64_t seq, v1::JobState state, double time_unix, int64_t generation,
                             const std::string& reason) {
  v1::JobEvent e = MakeEvent(seq, v1::JobEvent::JOB_ENDED, time_unix, generation, reason);
  e.set_state(state);
  return e;
}

inline double NowUnix() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace horovodd::daemon::testing
