#include "common/log.h"

#include <cstdio>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace horovodd {
namespace {

class StderrSink final : public LogSink {
 public:
  void Write(LogLevel, absl::string_view prefix, absl::string_view message) override {
    // One fwrite per line, so lines of different threads never interleave.
    const std::string line =
        prefix.empty() ? absl::StrCat(message, "\n") : absl::StrCat(prefix, ": ", message, "\n");
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
};

// The sink and the prefix, replaced together and never changed in place: a
// line takes a reference under the lock and writes outside it, so a sink may
// itself log (or fail a check) without deadlocking.
struct Destination {
  std::shared_ptr<LogSink> sink;
  std::string prefix;
  bool is_default = false;
};

class Router {
 public:
  std::shared_ptr<const Destination> Current() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return destination_;
  }

  // Replaces the sink (nullptr: the default one); returns the old sink,
  // nullptr when it was the default.
  std::shared_ptr<LogSink> ReplaceSink(std::shared_ptr<LogSink> sink) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto next = std::make_shared<Destination>(*destination_);
    next->is_default = sink == nullptr;
    next->sink = sink != nullptr ? std::move(sink) : default_sink_;
    std::shared_ptr<LogSink> old = destination_->is_default ? nullptr : destination_->sink;
    destination_ = std::move(next);
    return old;
  }

  void ReplacePrefix(std::string prefix) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto next = std::make_shared<Destination>(*destination_);
    next->prefix = std::move(prefix);
    destination_ = std::move(next);
  }

 private:
  const std::shared_ptr<LogSink> default_sink_ = std::make_shared<StderrSink>();
  absl::Mutex mu_;
  std::shared_ptr<const Destination> destination_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<Destination>(Destination{default_sink_, "", true});
};

// Never destroyed: threads may log while the process exits.
Router& TheRouter() {
  static Router* const router = new Router();
  return *router;
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(absl::string_view name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

void SetLogLevel(LogLevel level) {
  log_internal::min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(log_internal::min_level.load(std::memory_order_relaxed));
}

std::shared_ptr<LogSink> SetLogSink(std::shared_ptr<LogSink> sink) {
  return TheRouter().ReplaceSink(std::move(sink));
}

void SetLogPrefix(std::string prefix) { TheRouter().ReplacePrefix(std::move(prefix)); }

namespace log_internal {

void Write(LogLevel level, absl::string_view message) {
  const std::shared_ptr<const Destination> destination = TheRouter().Current();
  destination->sink->Write(level, destination->prefix, message);
}

}  // namespace log_internal
}  // namespace horovodd
