#include "daemon/service/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json_text.h"

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

}  // namespace

absl::Status ConfigureLogging(const std::string& level, LogFormat format) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str answers "off" for any name it does not know.
  if (parsed == spdlog::level::off || parsed == spdlog::level::critical) {
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
  logger->set_level(parsed);
  // Each line goes out at once: it is the service's only record of what it did.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace horovodd::daemon
