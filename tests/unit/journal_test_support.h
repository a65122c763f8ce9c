// Shared by the journal and archived-job tests: a state dir that is removed
// afterwards, and events shaped like the ones a job driver emits.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "horovodd.pb.h"

namespace horovodd::daemon::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hvdd-journal-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

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
