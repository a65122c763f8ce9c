// horovodd's log: spdlog's default logger writing to stderr (journald keeps it
// when horovodd runs under systemd), as text or as one JSON object per line.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "daemon/config/daemon_config.h"

namespace horovodd::daemon {

// Replaces spdlog's default logger. `level` is one of DaemonConfig's levels
// (trace, debug, info, warn, error); INVALID_ARGUMENT otherwise.
absl::Status ConfigureLogging(const std::string& level, LogFormat format);

}  // namespace horovodd::daemon
