#include "daemon/launch/process_types.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

std::string ExitInfo::Describe() const {
  if (signal == 0) {
    if (exit_code < 0) return "exit status unknown (the process was reaped elsewhere)";
    return absl::StrCat("exited with status ", exit_code);
  }
  // sigdescr_np is the thread-safe strsignal (glibc >= 2.32).
  const char* name = sigdescr_np(signal);
  return absl::StrCat("killed by signal ", signal, " (", name ? name : "unknown signal", ")",
                      core_dumped ? ", core dumped" : "");
}

}  // namespace horovodd::daemon
