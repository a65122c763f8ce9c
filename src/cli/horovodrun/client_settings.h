// horovodrun's settings about itself rather than the job: --verbose,
// --detach, --log-level (which workers also get, as HOROVOD_LOG_LEVEL),
// --output-filename, --prefix-output-with-timestamp, --daemon, and the
// credentials it reaches a daemon with (--token-file, --tls-ca, --tls-cert,
// --tls-key). Read from the command line and --config-file alike.
#pragma once

#include "absl/status/status.h"
#include "cli/client_credentials.h"
#include "cli/horovodrun/config_file.h"
#include "cli/horovodrun/run_options.h"

namespace horovodd::cli {

// INVALID_ARGUMENT naming the setting and its value.
absl::Status ReadLauncherSettings(const RawSettings& settings, RunOptions* options);

// The credential paths, made absolute; unset ones stay empty (the
// environment fills them in later, see client_credentials.h).
absl::Status ReadClientSecurity(const RawSettings& settings, ClientSecurity* security);

}  // namespace horovodd::cli
