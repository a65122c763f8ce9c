// What a launcher reported about one process (its ProcessCallbacks), for the
// launcher tests: the local, SSH and shim launchers report alike. Declare a
// recorder before the launcher, so that it outlives the launcher's callbacks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/launch/process_types.h"

namespace horovodd::testing {

class ProcessRecorder {
 public:
  // "Did not hang" deadline of the Await calls: generous, test machines are
  // small and loaded.
  static constexpr absl::Duration kPatience = absl::Seconds(60);

  daemon::ProcessCallbacks Callbacks() {
    daemon::ProcessCallbacks callbacks;
    callbacks.on_line = [this](daemon::OutputStream stream, std::string_view line) {
      absl::MutexLock lock(&mu_);
      if (exit_calls_ > 0) line_after_exit_ = true;
      const bool out = stream == daemon::OutputStream::kStdout;
      (out ? stdout_ : stderr_).emplace_back(line);
      tagged_.push_back(
          absl::StrCat(out ? "out:" : "err:", absl::string_view(line.data(), line.size())));
    };
    callbacks.on_exit = [this](const daemon::ExitInfo& info) {
      absl::MutexLock lock(&mu_);
      ++exit_calls_;
      exit_ = info;
    };
    return callbacks;
  }

  // The exit info, once on_exit ran; fails the test if it never does, or if
  // it ran more than once.
  daemon::ExitInfo AwaitExit() {
    absl::MutexLock lock(&mu_);
    const bool exited =
        mu_.AwaitWithDeadline(absl::Condition(
                                  +[](int* calls) { return *calls > 0; }, &exit_calls_),
                              absl::Now() + kPatience);
    REQUIRE(exited);
    CHECK(exit_calls_ == 1);
    return *exit_;
  }

  // The first n lines of a stream, once they arrived.
  std::vector<std::string> AwaitLines(size_t n,
                                      daemon::OutputStream stream = daemon::OutputStream::kStdout) {
    absl::MutexLock lock(&mu_);
    const std::vector<std::string>& lines =
        stream == daemon::OutputStream::kStdout ? stdout_ : stderr_;
    const auto enough = [&lines, n]() { return lines.size() >= n; };
    REQUIRE(mu_.AwaitWithDeadline(absl::Condition(&enough), absl::Now() + kPatience));
    return std::vector<std::string>(lines.begin(), lines.begin() + n);
  }

  std::vector<std::string> Lines(daemon::OutputStream stream) const {
    absl::MutexLock lock(&mu_);
    return stream == daemon::OutputStream::kStdout ? stdout_ : stderr_;
  }
  // Both streams in the order the lines came, each "out:LINE" or "err:LINE".
  std::vector<std::string> TaggedLines() const {
    absl::MutexLock lock(&mu_);
    return tagged_;
  }
  int exit_calls() const {
    absl::MutexLock lock(&mu_);
    return exit_calls_;
  }
  bool line_after_exit() const {
    absl::MutexLock lock(&mu_);
    return line_after_exit_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> stdout_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> stderr_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> tagged_ ABSL_GUARDED_BY(mu_);
  std::optional<daemon::ExitInfo> exit_ ABSL_GUARDED_BY(mu_);
  int exit_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool line_after_exit_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::testing
