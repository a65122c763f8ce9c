// horovodd's log: the logging facade (common/log.h) with a sink backed by
// spdlog, writing to stderr (journald keeps it when horovodd runs under
// systemd) as text with the time and level, or as one JSON object per line.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "daemon/config/daemon_config.h"

namespace horovodd::daemon {

// Installs the spdlog sink and sets the facade's level. `level` is one of
// DaemonConfig's levels (trace, debug, info, warn, error); INVALID_ARGUMENT
// otherwise.
absl::Status ConfigureLogging(const std::string& level, LogFormat format);

}  // namespace horovodd::daemon
