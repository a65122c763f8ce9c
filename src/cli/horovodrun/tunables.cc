#include "cli/horovodrun/tunables.h"

#include <cmath>
#include <cstdint>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::cli {
namespace {

enum class Value {
  kWholeNumber,  // >= min, as Horovod's type=int with its ">= 0" check
  kNumber,       // a finite number >= 0 (or > 0 where positive)
  kOnOff,        // "1" or "0"
  kText,         // passed as written
};

// Who acts on the variable: the warning depends on it.
enum class Effect {
  kActedOn,  // the worker runtime (or NCCL itself) reads it: no warning
  kNotYet,   // nothing reads it yet: accepted with a warning
  kMpiOnly,  // only MPI would: accepted with a warning
};

struct Tunable {
  const char* key;       // the setting (flag and config key)
  const char* variable;  // what workers get; nullptr: nothing (an MPI launcher's argument)
  Value value;
  Effect effect;
  int64_t min = 0;  // kWholeNumber: the least allowed
  // Horovod passes it only along with this setting (on, or given): the autotune options
  // only with --autotune, the mark-cycles flag only with a timeline file.
  const char* needs = nullptr;
  const char* needs_display = nullptr;
};

// Horovod's table (config_parser.py). The engine helper reads the timeline and stall check
// variables and the shared-memory transport HOROVOD_HIERARCHICAL_ALLREDUCE, by these names.
constexpr Tunable kTunables[] = {
    {"fusion_threshold_mb", "HOROVOD_FUSION_THRESHOLD", Value::kWholeNumber, Effect::kActedOn},
    {"cycle_time_ms", "HOROVOD_CYCLE_TIME", Value::kNumber, Effect::kActedOn},
    {"cache_capacity", "HOROVOD_CACHE_CAPACITY", Value::kWholeNumber, Effect::kNotYet},
    {"hierarchical_allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", Value::kOnOff, Effect::kActedOn},
    {"hierarchical_allgather", "HOROVOD_HIERARCHICAL_ALLGATHER", Value::kOnOff, Effect::kNotYet},
    {"autotune", "HOROVOD_AUTOTUNE", Value::kOnOff, Effect::kNotYet},
    {"autotune_log_file", "HOROVOD_AUTOTUNE_LOG", Value::kText, Effect::kNotYet, 0, "autotune",
     "--autotune"},
    {"autotune_warmup_samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", Value::kWholeNumber,
     Effect::kNotYet, 0, "autotune", "--autotune"},
    {"autotune_steps_per_sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", Value::kWholeNumber,
     Effect::kNotYet, 0, "autotune", "--autotune"},
    {"autotune_bayes_opt_max_samples", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
     Value::kWholeNumber, Effect::kNotYet, 0, "autotune", "--autotune"},
    {"autotune_gaussian_process_noise", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", Value::kNumber,
     Effect::kNotYet, 0, "autotune", "--autotune"},
    {"timeline_filename", "HOROVOD_TIMELINE", Value::kText, Effect::kActedOn},
    {"timeline_mark_cycles", "HOROVOD_TIMELINE_MARK_CYCLES", Value::kOnOff, Effect::kActedOn, 0,
     "timeline_filename", "--timeline-filename"},
    {"no_stall_check", "HOROVOD_STALL_CHECK_DISABLE", Value::kOnOff, Effect::kActedOn},
    {"stall_check_warning_time_seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", Value::kWholeNumber,
     Effect::kActedOn},
    {"stall_check_shutdown_time_seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     Value::kWholeNumber, Effect::kActedOn},
    {"mpi_threads_disable", "HOROVOD_MPI_THREADS_DISABLE", Value::kOnOff, Effect::kMpiOnly},
    {"mpi_args", nullptr, Value::kText, Effect::kMpiOnly},
    {"binding_args", nullptr, Value::kText, Effect::kMpiOnly},
    // --tcp: NCCL_IB_DISABLE=1 (and nothing when off), which NCCL itself reads.
    {"tcp", "NCCL_IB_DISABLE", Value::kOnOff, Effect::kActedOn},
    {"num_nccl_streams", "HOROVOD_NUM_NCCL_STREAMS", Value::kWholeNumber, Effect::kNotYet},
    {"thread_affinity", "HOROVOD_THREAD_AFFINITY", Value::kWholeNumber, Effect::kNotYet},
    // Our runtime's ring timeout: 0 would fail every collective at once, so at least 1.
    {"gloo_timeout_seconds", "HOROVOD_GLOO_TIMEOUT_SECONDS", Value::kWholeNumber, Effect::kActedOn,
     1},
    // Horovod's inverted pair: --log-without-timestamp sets HOROVOD_LOG_HIDE_TIME=1.
    {"log_with_timestamp", "HOROVOD_LOG_HIDE_TIME", Value::kOnOff, Effect::kNotYet},
};

// The variable's value for a setting already read as `text` (or `on`).
std::string VariableValue(const Tunable& t, const std::string& text, int64_t whole, bool on) {
  const std::string key = t.key;
  switch (t.value) {
    case Value::kWholeNumber:
      // Horovod's unit conversion: MB on the command line, bytes in the variable.
      return key == "fusion_threshold_mb" ? absl::StrCat(whole * 1024 * 1024) : absl::StrCat(whole);
    case Value::kOnOff:
      if (key == "log_with_timestamp") return on ? "0" : "1";
      return on ? "1" : "0";
    case Value::kNumber:
    case Value::kText:
      return text;
  }
  return text;
}

absl::StatusOr<int64_t> ReadWhole(const RawSetting& setting, int64_t min) {
  const std::string& text = setting.values.front();
  int64_t value = 0;
  // Bounded so that MB -> bytes cannot overflow.
  if (!absl::SimpleAtoi(text, &value) || value > (int64_t{1} << 40)) {
    return InvalidSetting(setting, absl::StrCat("'", text, "' is not a whole number"));
  }
  if (value < min) return InvalidSetting(setting, absl::StrCat(value, " is less than ", min));
  return value;
}

absl::Status CheckNumber(const Tunable& t, const RawSetting& setting) {
  const std::string& text = setting.values.front();
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return InvalidSetting(setting, absl::StrCat("'", text, "' is not a number"));
  }
  const std::string key = t.key;
  if (key == "autotune_gaussian_process_noise" && (value < 0 || value > 1)) {
    return InvalidSetting(setting, absl::StrCat(text, " is not in [0, 1]"));
  }
  // Horovod takes 0; horovodd's engine needs a positive cycle time.
  if (key == "cycle_time_ms" && !(value > 0)) {
    return InvalidSetting(setting, absl::StrCat(text, " must be more than 0 milliseconds"));
  }
  if (value < 0) return InvalidSetting(setting, absl::StrCat(text, " is less than 0"));
  return absl::OkStatus();
}

// Whether `t.needs` is met: the setting it names is on (a flag) or given (a value).
absl::StatusOr<bool> NeedsMet(const RawSettings& settings, const Tunable& t) {
  if (t.needs == nullptr) return true;
  const RawSetting* needed = FindSetting(settings, t.needs);
  if (needed == nullptr) return false;
  if (std::string(t.needs) == "autotune") return ReadBool(settings, t.needs);
  return !needed->values.front().empty();
}

}  // namespace

absl::Status ReadTunables(const RawSettings& settings, v1::JobSpec* spec,
                          std::vector<std::string>* warnings) {
  for (const Tunable& t : kTunables) {
    const RawSetting* setting = FindSetting(settings, t.key);
    if (setting == nullptr) continue;
    const std::string& text = setting->values.front();
    int64_t whole = 0;
    bool on = false;
    switch (t.value) {
      case Value::kWholeNumber: {
        HVDD_ASSIGN_OR_RETURN(whole, ReadWhole(*setting, t.min));
        break;
      }
      case Value::kNumber:
        HVDD_RETURN_IF_ERROR(CheckNumber(t, *setting));
        break;
      case Value::kOnOff: {
        HVDD_ASSIGN_OR_RETURN(on, ReadBool(settings, t.key));
        break;
      }
      case Value::kText:
        if (text.empty()) return InvalidSetting(*setting, "the value is empty");
        break;
    }
    HVDD_ASSIGN_OR_RETURN(bool needs_met, NeedsMet(settings, t));
    if (!needs_met) {
      warnings->push_back(absl::StrCat(setting->origin, " has no effect without ", t.needs_display,
                                       " (as in Horovod)"));
      continue;
    }
    const std::string key = t.key;
    // Horovod sets these two only when on.
    const bool only_when_on = key == "autotune" || key == "tcp";
    if (t.variable != nullptr && !(only_when_on && !on)) {
      (*spec->mutable_env())[t.variable] = VariableValue(t, text, whole, on);
    }
    // An on/off setting that asks for nothing (--no-hierarchical-allgather, the default
    // --log-with-timestamp) earns no warning.
    const bool asks = t.value != Value::kOnOff || (key == "log_with_timestamp" ? !on : on);
    // The autotune options are covered by --autotune's own line.
    const bool covered = t.needs != nullptr && std::string(t.needs) == "autotune";
    if (!asks || covered || t.effect == Effect::kActedOn) continue;
    if (t.effect == Effect::kMpiOnly) {
      warnings->push_back(
          absl::StrCat(setting->origin, " has no effect: horovodd runs Gloo, not MPI"));
      continue;
    }
    warnings->push_back(absl::StrCat(setting->origin,
                                     " is accepted, but horovodd does not act on it yet (workers "
                                     "get ",
                                     t.variable, ")"));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::cli
