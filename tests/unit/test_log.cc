// src/common/log.h: the level filter, the prefix, the default stderr sink and
// swapping the sink while other threads log.
#include "common/log.h"

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "child_stderr.h"

namespace horovodd {
namespace {

struct Line {
  LogLevel level;
  std::string prefix;
  std::string message;
};

class RecordingSink final : public LogSink {
 public:
  void Write(LogLevel level, absl::string_view prefix, absl::string_view message) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    lines_.push_back({level, std::string(prefix), std::string(message)});
  }

  std::vector<Line> lines() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

// Installs a recording sink for one test and puts back the defaults after it.
class Recording {
 public:
  Recording() : sink_(std::make_shared<RecordingSink>()) { SetLogSink(sink_); }
  ~Recording() {
    SetLogSink(nullptr);
    SetLogPrefix("");
    SetLogLevel(LogLevel::kInfo);
  }
  RecordingSink& sink() { return *sink_; }

 private:
  std::shared_ptr<RecordingSink> sink_;
};

TEST_CASE("ParseLogLevel knows the config's five words and nothing else") {
  CHECK(ParseLogLevel("trace") == LogLevel::kTrace);
  CHECK(ParseLogLevel("debug") == LogLevel::kDebug);
  CHECK(ParseLogLevel("info") == LogLevel::kInfo);
  CHECK(ParseLogLevel("warn") == LogLevel::kWarning);
  CHECK(ParseLogLevel("error") == LogLevel::kError);
  CHECK(!ParseLogLevel("warning").has_value());
  CHECK(!ParseLogLevel("INFO").has_value());
  CHECK(!ParseLogLevel("").has_value());
}

TEST_CASE("Lines below the level are dropped without evaluating their operands") {
  Recording recording;
  CHECK(GetLogLevel() == LogLevel::kInfo);
  int evaluated = 0;
  auto count = [&evaluated] { return ++evaluated; };

  HVDD_LOG(DEBUG) << "dropped " << count();
  HVDD_LOG(TRACE) << "dropped " << count();
  CHECK(evaluated == 0);
  HVDD_LOG(INFO) << "kept " << count();
  HVDD_LOG(ERROR) << "kept " << count();
  CHECK(evaluated == 2);

  SetLogLevel(LogLevel::kWarning);
  HVDD_LOG(INFO) << "dropped " << count();
  HVDD_LOG(WARNING) << "kept " << count();
  SetLogLevel(LogLevel::kTrace);
  HVDD_LOG(TRACE) << "kept " << count();

  const std::vector<Line> lines = recording.sink().lines();
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].level == LogLevel::kInfo);
  CHECK(lines[0].message == "kept 1");
  CHECK(lines[1].level == LogLevel::kError);
  CHECK(lines[1].message == "kept 2");
  CHECK(lines[2].level == LogLevel::kWarning);
  CHECK(lines[2].message == "kept 3");
  CHECK(lines[3].level == LogLevel::kTrace);
  CHECK(lines[3].message == "kept 4");
}

TEST_CASE("HVDD_LOG is one statement, safe in an unbraced if") {
  Recording recording;
  const bool verbose = false;
  if (verbose)
    HVDD_LOG(INFO) << "not this";
  else
    HVDD_LOG(INFO) << "this";
  const std::vector<Line> lines = recording.sink().lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].message == "this");
}

TEST_CASE("The sink gets the prefix of the moment") {
  Recording recording;
  HVDD_LOG(INFO) << "before";
  SetLogPrefix("[rank 3]");
  HVDD_LOG(INFO) << "after";
  const std::vector<Line> lines = recording.sink().lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].prefix.empty());
  CHECK(lines[1].prefix == "[rank 3]");
}

TEST_CASE("SetLogSink returns the sink it replaces; nullptr stands for the default") {
  auto first = std::make_shared<RecordingSink>();
  auto second = std::make_shared<RecordingSink>();
  CHECK(SetLogSink(first) == nullptr);
  HVDD_LOG(INFO) << "to the first";
  CHECK(SetLogSink(second) == first);
  HVDD_LOG(INFO) << "to the second";
  CHECK(SetLogSink(nullptr) == second);
  CHECK(SetLogSink(nullptr) == nullptr);
  REQUIRE(first->lines().size() == 1);
  CHECK(first->lines()[0].message == "to the first");
  REQUIRE(second->lines().size() == 1);
  CHECK(second->lines()[0].message == "to the second");
}

TEST_CASE("The default sink writes '<prefix>: <message>' lines to stderr, without the level") {
  const auto [signal, err] = hvdd_test::RunInChild([] {
    HVDD_LOG(WARNING) << "no prefix yet";
    SetLogPrefix("horovodd-shim");
    HVDD_LOG(INFO) << "pid " << 42 << " serving";
    HVDD_LOG(DEBUG) << "below the level";
  });
  CHECK(signal == 0);
  CHECK(err == "no prefix yet\nhorovodd-shim: pid 42 serving\n");
}

TEST_CASE("Swapping the sink while threads log loses and tears no line") {
  auto first = std::make_shared<RecordingSink>();
  auto second = std::make_shared<RecordingSink>();
  SetLogSink(first);
  constexpr int kThreads = 4;
  constexpr int kLinesEach = 2000;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &running] {
      for (int i = 0; i < kLinesEach; ++i) HVDD_LOG(INFO) << "thread " << t << " line " << i;
      running.fetch_sub(1);
    });
  }
  for (int swaps = 0; running.load() > 0; ++swaps) {
    SetLogSink(swaps % 2 == 0 ? second : first);
    SetLogPrefix(absl::StrCat("swap ", swaps));
  }
  for (std::thread& thread : threads) thread.join();
  SetLogSink(nullptr);
  SetLogPrefix("");

  std::set<std::string> seen;
  for (const auto& sink : {first, second}) {
    for (const Line& line : sink->lines()) {
      CHECK((line.prefix.empty() || line.prefix.rfind("swap ", 0) == 0));
      CHECK(seen.insert(line.message).second);
    }
  }
  CHECK(seen.size() == static_cast<size_t>(kThreads * kLinesEach));
  for (int t = 0; t < kThreads; ++t) {
    CHECK(seen.count(absl::StrCat("thread ", t, " line 0")) == 1);
    CHECK(seen.count(absl::StrCat("thread ", t, " line ", kLinesEach - 1)) == 1);
  }
}

}  // namespace
}  // namespace horovodd
