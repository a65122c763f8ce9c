#include "daemon/service/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json_text.h"
#include "common/log.h"

namespace horovodd::daemon {
namespace {

std::string JsonString(spdlog::string_view_t text) {
  return JsonQuote(std::string_view(text.data(), text.size()));
}

// {"time":"2024-05-01T12:00:00.123Z","level":"info","message":"..."}
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = absl::StrCat(
        "{\"time\":\"",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time), absl::UTCTimeZone()),
        "\",\"level\":", JsonString(spdlog::level::to_string_view(msg.level)),
        ",\"message\":", JsonString(msg.payload), "}\n");
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }
};

spdlog::level::level_enum SpdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      break;
  }
  return spdlog::level::err;
}

// The facade's lines, formatted and written by an spdlog logger (thread-safe:
// its stderr sink locks). The prefix is the logger's name, which neither
// format prints: horovodd's log has one writer.
class SpdlogSink final : public LogSink {
 public:
  explicit SpdlogSink(std::shared_ptr<spdlog::logger> logger) : logger_(std::move(logger)) {}
  void Write(LogLevel level, absl::string_view, absl::string_view message) override {
    logger_->log(SpdlogLevel(level), spdlog::string_view_t(message.data(), message.size()));
  }

 private:
  const std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace

absl::Status ConfigureLogging(const std::string& level, LogFormat format) {
  const std::optional<LogLevel> parsed = ParseLogLevel(level);
  if (!parsed.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("log level '", level, "' is not one of trace, debug, info, warn, error"));
  }
  auto logger = std::make_shared<spdlog::logger>("horovodd",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonLineFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %l: %v");
  }
  // The facade filters; the logger passes everything it is handed.
  logger->set_level(spdlog::level::trace);
  // Each line goes out at once: it is the service's only record of what it did.
  logger->flush_on(spdlog::level::trace);
  SetLogPrefix("horovodd");
  SetLogSink(std::make_shared<SpdlogSink>(std::move(logger)));
  SetLogLevel(*parsed);
  return absl::OkStatus();
}

}  // namespace horovodd::daemon
