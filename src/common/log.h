// The one way horovodd's code logs, in the daemon, horovodd-shim and the
// worker runtime alike:
//
//   HVDD_LOG(INFO) << "job " << job_id << " taken back";
//   HVDD_LOG(WARNING) << "refused " << method << " from " << peer;
//
// Levels: TRACE, DEBUG, INFO, WARNING, ERROR. A line below the process's
// minimum level (SetLogLevel; INFO at start) costs one relaxed atomic load:
// nothing after HVDD_LOG(...) is evaluated. A line that passes goes to the
// process's one sink with the process's prefix.
//
// The default sink writes "<prefix>: <message>\n" to stderr ("<message>\n"
// when the prefix is empty), one line per write; the level filters but is
// not printed. A program that wants more installs its own sink: horovodd's is
// backed by spdlog and prints the time and level (daemon/service/logging.h).
// The prefix ("horovodd-shim", "horovodrun", ...) and the sink are the
// program's to choose, in main(); library code only logs.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

namespace horovodd {

enum class LogLevel : int { kTrace, kDebug, kInfo, kWarning, kError };

// "trace", "debug", "info", "warn" or "error" (the words of horovodd's
// log_level key); nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(absl::string_view name);

// Where the lines go. Write is called from any thread, from several at once,
// and after SetLogSink has replaced the sink by lines that were already on
// their way: a sink does its own locking and stays usable while any
// shared_ptr to it lives.
class LogSink {
 public:
  virtual ~LogSink() = default;
  // One line: no trailing newline; `prefix` may be empty.
  virtual void Write(LogLevel level, absl::string_view prefix, absl::string_view message) = 0;
};

// Lines below `level` are dropped from now on, in every thread.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// Every line from now on goes to `sink` (nullptr: the default stderr sink).
// Returns the sink it replaces (nullptr when that was the default one).
std::shared_ptr<LogSink> SetLogSink(std::shared_ptr<LogSink> sink);

// The prefix every sink is handed from now on; empty at start.
void SetLogPrefix(std::string prefix);

namespace log_internal {

inline std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

inline bool Enabled(LogLevel level) {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

// Hands `message` to the sink with the current prefix.
void Write(LogLevel level, absl::string_view message);

// Collects one line; its destructor writes it.
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine() { Write(level_, message_.str()); }
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return message_; }

 private:
  const LogLevel level_;
  std::ostringstream message_;
};

// Makes `HVDD_LOG(x) << ...` one expression of type void.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

// HVDD_LOG's level names, pasted to these (so a DEBUG or ERROR macro from
// elsewhere cannot clash).
inline constexpr LogLevel kLevelTRACE = LogLevel::kTrace;
inline constexpr LogLevel kLevelDEBUG = LogLevel::kDebug;
inline constexpr LogLevel kLevelINFO = LogLevel::kInfo;
inline constexpr LogLevel kLevelWARNING = LogLevel::kWarning;
inline constexpr LogLevel kLevelERROR = LogLevel::kError;

}  // namespace log_internal
}  // namespace horovodd

#define HVDD_LOG(severity)                                                       \
  !::horovodd::log_internal::Enabled(::horovodd::log_internal::kLevel##severity) \
      ? (void)0                                                                  \
      : ::horovodd::log_internal::LogVoidify() &                                 \
            ::horovodd::log_internal::LogLine(::horovodd::log_internal::kLevel##severity).stream()
