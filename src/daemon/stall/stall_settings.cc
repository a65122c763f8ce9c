#include "daemon/stall/stall_settings.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

std::optional<std::string> Variable(const v1::JobSpec& spec, const StallSettings::Lookup& lookup,
                                    const char* name) {
  auto it = spec.env().find(name);
  if (it != spec.env().end()) return it->second;
  const char* value = lookup ? lookup(name) : nullptr;
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::Duration Seconds(const std::optional<std::string>& text, absl::Duration fallback) {
  double seconds = 0;
  if (!text.has_value() || text->empty() || !absl::SimpleAtod(*text, &seconds) || !(seconds >= 0)) {
    return fallback;
  }
  return absl::Seconds(seconds);
}

// As the worker's engine reads HOROVOD_STALL_CHECK_DISABLE.
bool Truthy(const std::optional<std::string>& text) {
  return text.has_value() && !text->empty() && *text != "0" && *text != "false" && *text != "False";
}

}  // namespace

StallSettings StallSettings::ForJob(const v1::JobSpec& spec, const Lookup& lookup) {
  StallSettings s;
  s.enabled = !Truthy(Variable(spec, lookup, "HOROVOD_STALL_CHECK_DISABLE"));
  s.warning = Seconds(Variable(spec, lookup, "HOROVOD_STALL_CHECK_TIME_SECONDS"), s.warning);
  s.shutdown = Seconds(Variable(spec, lookup, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"), s.shutdown);
  if (s.warning <= absl::ZeroDuration()) s.enabled = false;
  s.evict_stragglers = spec.evict_stragglers();
  if (!s.enabled) return s;
  if (s.shutdown > absl::ZeroDuration()) {
    // Horovod shuts down no earlier than it warns.
    s.act_after = std::max(s.shutdown, s.warning);
  } else if (spec.elastic()) {
    s.act_after = std::max(kDefaultElasticEviction, 2 * s.warning);
  }
  return s;
}

std::string StallSettings::Describe(bool elastic) const {
  if (!enabled) return "stall check off";
  std::string text = absl::StrCat("stall warning ", absl::FormatDuration(warning));
  if (act_after == absl::InfiniteDuration()) {
    absl::StrAppend(&text, ", no stall shutdown");
  } else {
    absl::StrAppend(&text, elastic ? ", culprits evicted after " : ", the job fails after ",
                    absl::FormatDuration(act_after));
  }
  if (evict_stragglers > 0) {
    absl::StrAppend(&text, ", stragglers evicted past ", evict_stragglers, "x the median");
  }
  return text;
}

}  // namespace horovodd::daemon
