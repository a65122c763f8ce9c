#include "cli/horovodrun/client_settings.h"

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::cli {

absl::Status ReadLauncherSettings(const RawSettings& settings, RunOptions* options) {
  HVDD_ASSIGN_OR_RETURN(options->verbose, ReadBool(settings, "verbose"));
  HVDD_ASSIGN_OR_RETURN(options->detach, ReadBool(settings, "detach"));
  HVDD_ASSIGN_OR_RETURN(options->prefix_output_with_timestamp,
                        ReadBool(settings, "prefix_output_with_timestamp"));
  if (const RawSetting* level = FindSetting(settings, "log_level")) {
    // Horovod's levels, in any case; the workers get Horovod's spelling.
    const std::string text = absl::AsciiStrToLower(level->values.front());
    if (text != "trace" && text != "debug" && text != "info" && text != "warning" &&
        text != "error" && text != "fatal") {
      return InvalidSetting(*level, absl::StrCat("'", level->values.front(),
                                                 "' is not one of trace, "
                                                 "debug, info, warning, error, fatal"));
    }
    options->log_level = text == "fatal" ? "error" : text;
    (*options->spec.mutable_env())["HOROVOD_LOG_LEVEL"] = absl::AsciiStrToUpper(text);
  }
  if (const RawSetting* output = FindSetting(settings, "output_filename")) {
    if (output->values.front().empty()) return InvalidSetting(*output, "the directory is empty");
    options->output_filename =
        std::filesystem::absolute(output->values.front()).lexically_normal().string();
  }
  if (const RawSetting* daemon = FindSetting(settings, "daemon")) {
    if (daemon->values.front().empty()) return InvalidSetting(*daemon, "the address is empty");
    options->daemon_address = daemon->values.front();
  }
  return absl::OkStatus();
}

absl::Status ReadClientSecurity(const RawSettings& settings, ClientSecurity* security) {
  const std::pair<const char*, std::string*> kPaths[] = {
      {"token_file", &security->token_file},
      {"tls_ca", &security->tls_ca},
      {"tls_cert", &security->tls_cert},
      {"tls_key", &security->tls_key},
  };
  for (const auto& [key, field] : kPaths) {
    const RawSetting* setting = FindSetting(settings, key);
    if (setting == nullptr) continue;
    if (setting->values.front().empty()) return InvalidSetting(*setting, "the path is empty");
    *field = std::filesystem::absolute(setting->values.front()).lexically_normal().string();
  }
  return absl::OkStatus();
}

}  // namespace horovodd::cli
