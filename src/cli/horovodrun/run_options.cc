#include "cli/horovodrun/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/horovodrun/client_settings.h"
#include "cli/horovodrun/config_file.h"
#include "cli/horovodrun/flag_table.h"
#include "cli/horovodrun/remote_settings.h"
#include "cli/horovodrun/slurm_settings.h"
#include "cli/horovodrun/tunables.h"
#include "common/status_macros.h"
#include "discovery/host_parser.h"

namespace horovodd::cli {
namespace {

namespace fs = std::filesystem;
using discovery::HostSet;

// Horovod's defaults.
constexpr double kDefaultElasticTimeout = 600;
constexpr double kDefaultStartTimeout = 30;
// No range: a failing host is blacklisted for the rest of the job (the daemon reads HI 0 so).
constexpr double kDefaultCooldownLow = 0;
constexpr double kDefaultCooldownHigh = 0;
constexpr double kDefaultDiscoveryInterval = 1;
constexpr double kDefaultDiscoveryTimeout = 10;
// Horovod has no such timeout. A stopped worker is found in about 10 s; a
// live one starved of CPU or network for a few seconds (a loaded 2-core VM
// went 3.6 s unheard) is not killed and its host not blacklisted, which a
// 2 s default did (heartbeats come every 500 ms in a job of up to 1,000).
constexpr double kDefaultLivenessTimeout = 10;
constexpr int kDefaultSlotsPerHost = 1;

constexpr char kErrorPrefix[] = "horovodrun: error: ";

// Our flags, and the worker command that follows them.
struct SplitArgs {
  std::vector<std::string> flags;  // for CLI11, "-np" already spelled "--num-proc"
  std::vector<std::string> command;
  bool help = false;
  bool version = false;
};

// Walks argv with each flag's arity, so that the first positional argument (or "--") starts
// the command even when the command has flags of its own.
absl::StatusOr<SplitArgs> SplitCommandLine(const CLI::App& app, int argc, const char* const* argv) {
  SplitArgs split;
  std::optional<absl::Status> unknown;  // reported unless --help was asked for
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command
    for (const SingleDashAlias& alias : SingleDashAliases()) {
      const std::string spelled = alias.alias;
      if (arg == spelled || absl::StartsWith(arg, spelled + "=")) {
        arg = alias.long_name + arg.substr(spelled.size());
        break;
      }
    }

    const bool is_long = absl::StartsWith(arg, "--");
    const std::string name = is_long ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
    const bool value_attached = is_long ? arg.find('=') != std::string::npos : arg.size() > 2;
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) {
      if (!unknown) {
        unknown = absl::InvalidArgumentError(
            absl::StrCat("unknown flag '", argv[i],
                         "' (see horovodrun --help; put the worker command "
                         "after \"--\" if it starts with '-')"));
      }
      continue;
    }
    if (opt == app.get_help_ptr()) split.help = true;
    if (opt->check_lname("version")) split.version = true;
    split.flags.push_back(arg);
    const int arity = value_attached ? 0 : opt->get_items_expected_max();
    for (int k = 0; k < arity; ++k) {
      if (++i >= argc) {
        return absl::InvalidArgumentError(absl::StrCat(
            DisplayName(name), " needs ", arity == 1 ? "a value" : absl::StrCat(arity, " values"),
            " (", opt->get_option_text(), ")"));
      }
      split.flags.push_back(argv[i]);
    }
  }
  for (; i < argc; ++i) split.command.push_back(argv[i]);
  if (unknown && !split.help && !split.version) return *unknown;
  return split;
}

// The command line's settings, in the config file's shape, named as the user typed them.
// The two flags of an on/off pair cannot both be given, as in Horovod's parser.
absl::StatusOr<RawSettings> CommandLineSettings(const CLI::App& app) {
  RawSettings settings;
  for (const FlagDef& flag : Flags()) {
    const CLI::Option* opt =
        app.get_option(std::string(flag.names).substr(0, std::string(flag.names).find(',')));
    if (opt->count() == 0) continue;
    const std::string setting = SettingOf(flag);
    if (const RawSetting* other = FindSetting(settings, setting)) {
      return absl::InvalidArgumentError(
          absl::StrCat(other->origin, " and ", flag.display, " cannot be used together"));
    }
    std::vector<std::string> values = opt->reduced_results();
    if (std::string(flag.value_text).empty() && std::string(flag.flag_value) == "false") {
      // The "off" flag of a pair: --no-x is x false (and --no-x=false, x true).
      const std::string given = absl::AsciiStrToLower(values.empty() ? "" : values.front());
      if (given == "true" || given == "1" || given.empty()) values = {"false"};
      if (given == "false" || given == "0") values = {"true"};
    }
    settings[setting] = RawSetting{flag.display, std::move(values)};
  }
  return settings;
}

// The config file, then the command line over it. A host source given on the command line
// replaces the file's (one place says where hosts come from). Env variables merge by name
// instead, so BuildRunOptions reads them from each layer.
RawSettings Merge(RawSettings file, const RawSettings& command_line) {
  const char* host_keys[] = {"host_discovery_script", "hosts", "hostfile", "host_discovery"};
  for (const char* key : host_keys) {
    if (command_line.count(key) != 0) {
      for (const char* other : host_keys) file.erase(other);
      break;
    }
  }
  for (const auto& [key, setting] : command_line) file[key] = setting;
  return file;
}

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status ReadEnv(const RawSettings& settings, v1::JobSpec* spec) {
  const RawSetting* env = FindSetting(settings, "env");
  if (env == nullptr) return absl::OkStatus();
  for (const std::string& assignment : env->values) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos) {
      return InvalidSetting(*env, absl::StrCat("'", assignment, "' is not NAME=VALUE"));
    }
    const std::string name = assignment.substr(0, eq);
    if (!IsValidEnvName(name)) {
      return InvalidSetting(*env,
                            absl::StrCat("'", name,
                                         "' is not a valid environment variable name "
                                         "(letters, digits and '_', not starting with a digit)"));
    }
    (*spec->mutable_env())[name] = assignment.substr(eq + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadExecutable(const RawSetting& setting) {
  const fs::path path = fs::absolute(setting.values.front()).lexically_normal();
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    return InvalidSetting(setting, absl::StrCat(path.string(), ": no such file"));
  }
  if (!fs::is_regular_file(status)) {
    return InvalidSetting(setting, absl::StrCat(path.string(), ": not a regular file"));
  }
  if (access(path.c_str(), X_OK) != 0) {
    return InvalidSetting(setting, absl::StrCat(path.string(), ": not executable (chmod +x it)"));
  }
  return path.string();
}

absl::StatusOr<HostSet> ReadHostfile(const RawSetting& setting, int slots_per_host) {
  const std::string& path = setting.values.front();
  std::ifstream in(path);
  if (!in) {
    return InvalidSetting(setting,
                          absl::StrCat(path, ": cannot read it (", std::strerror(errno), ")"));
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) {  // opens fine, then reads as an empty file
    return InvalidSetting(setting, absl::StrCat(path, ": is a directory"));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<HostSet> hosts = discovery::ParseHostfile(contents.str(), slots_per_host);
  if (!hosts.ok()) {
    return InvalidSetting(setting, absl::StrCat(path, ": ", hosts.status().message()));
  }
  return hosts;
}

// Fills spec->discovery from the one host source given; returns the fixed hosts, if any.
absl::StatusOr<std::optional<HostSet>> ReadHostSource(const RawSettings& settings,
                                                      int slots_per_host, v1::JobSpec* spec) {
  const RawSetting* script = FindSetting(settings, "host_discovery_script");
  const RawSetting* list = FindSetting(settings, "hosts");
  const RawSetting* file = FindSetting(settings, "hostfile");
  const RawSetting* given[] = {script, list, file};
  const RawSetting* first = nullptr;
  for (const RawSetting* source : given) {
    if (source == nullptr) continue;
    if (first != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(first->origin, " and ", source->origin, " cannot be used together"));
    }
    first = source;
  }
  if (script != nullptr) {
    HVDD_ASSIGN_OR_RETURN(std::string path, ReadExecutable(*script));
    spec->mutable_discovery()->set_script(path);
    return std::nullopt;
  }
  if (file != nullptr) return ReadHostfile(*file, slots_per_host);
  if (list == nullptr) return std::nullopt;
  absl::StatusOr<HostSet> hosts = discovery::ParseHostList(list->values.front(), slots_per_host);
  if (!hosts.ok()) {
    return InvalidSetting(*list, std::string(hosts.status().message()));
  }
  return hosts;
}

absl::Status ReadCooldown(const RawSettings& settings, v1::JobSpec* spec) {
  double low = kDefaultCooldownLow;
  double high = kDefaultCooldownHigh;
  if (const RawSetting* range = FindSetting(settings, "blacklist_cooldown_range")) {
    if (range->values.size() != 2) return InvalidSetting(*range, "needs two values, LO HI");
    HVDD_ASSIGN_OR_RETURN(double lo, ParseSeconds(*range, range->values[0], /*zero_allowed=*/true));
    HVDD_ASSIGN_OR_RETURN(double hi, ParseSeconds(*range, range->values[1], /*zero_allowed=*/true));
    if (lo > hi) {
      return InvalidSetting(
          *range, absl::StrCat("LO ", range->values[0], " is greater than HI ", range->values[1]));
    }
    low = lo;
    high = hi;
  }
  spec->set_blacklist_cooldown_min_seconds(low);
  spec->set_blacklist_cooldown_max_seconds(high);
  return absl::OkStatus();
}

// --evict-stragglers FACTOR: 0 (off, the default) or a factor of at least 1.
absl::Status ReadEvictStragglers(const RawSettings& settings, v1::JobSpec* spec) {
  const RawSetting* setting = FindSetting(settings, "evict_stragglers");
  if (setting == nullptr) return absl::OkStatus();
  const std::string& text = setting->values.front();
  double factor = 0;
  if (!absl::SimpleAtod(text, &factor) || !std::isfinite(factor)) {
    return InvalidSetting(*setting, absl::StrCat("'", text, "' is not a number"));
  }
  if (factor != 0 && factor < 1) {
    return InvalidSetting(*setting, absl::StrCat(text,
                                                 " is less than 1 (a rank slower than FACTOR times "
                                                 "the median; 0 turns it off)"));
  }
  spec->set_evict_stragglers(factor);
  return absl::OkStatus();
}

absl::Status ReadTimeouts(const RawSettings& settings, v1::JobSpec* spec) {
  struct Timeout {
    const char* key;
    double fallback;
    void (*store)(v1::JobSpec*, double);
    // Horovod's variable for the default when the flag is not given, if it has one.
    const char* variable = nullptr;
  };
  const Timeout timeouts[] = {
      {"elastic_timeout", kDefaultElasticTimeout,
       [](v1::JobSpec* s, double v) { s->set_elastic_timeout_seconds(v); },
       "HOROVOD_ELASTIC_TIMEOUT"},
      {"start_timeout", kDefaultStartTimeout,
       [](v1::JobSpec* s, double v) { s->set_start_timeout_seconds(v); }, "HOROVOD_START_TIMEOUT"},
      {"discovery_interval", kDefaultDiscoveryInterval,
       [](v1::JobSpec* s, double v) { s->mutable_discovery()->set_interval_seconds(v); }},
      {"discovery_timeout", kDefaultDiscoveryTimeout,
       [](v1::JobSpec* s, double v) { s->mutable_discovery()->set_script_timeout_seconds(v); }},
      {"liveness_timeout", kDefaultLivenessTimeout,
       [](v1::JobSpec* s, double v) { s->set_liveness_timeout_seconds(v); }},
  };
  for (const Timeout& t : timeouts) {
    double fallback = t.fallback;
    const char* from_env = t.variable != nullptr ? std::getenv(t.variable) : nullptr;
    if (from_env != nullptr && *from_env != '\0') {
      HVDD_ASSIGN_OR_RETURN(fallback, ParseSeconds(RawSetting{t.variable, {from_env}}, from_env,
                                                   /*zero_allowed=*/false));
    }
    HVDD_ASSIGN_OR_RETURN(double seconds, ReadSeconds(settings, t.key, fallback));
    t.store(spec, seconds);
  }
  return ReadCooldown(settings, spec);
}

// How a setting reads in a message about its value: "--min-np 4", "job.yaml:3: min_np 4".
std::string Named(const RawSettings& settings, const std::string& key, int value) {
  const RawSetting* s = FindSetting(settings, key);
  return absl::StrCat(s != nullptr ? s->origin : key, " ", value);
}

// np, min-np and max-np, with Horovod's defaults; `hosts` are the fixed hosts, if any.
absl::Status ReadJobSize(const RawSettings& settings, const std::optional<HostSet>& hosts,
                         v1::JobSpec* spec) {
  HVDD_ASSIGN_OR_RETURN(std::optional<int> np, ReadInt(settings, "num_proc", 1));
  HVDD_ASSIGN_OR_RETURN(std::optional<int> min_np, ReadInt(settings, "min_np", 1));
  HVDD_ASSIGN_OR_RETURN(std::optional<int> max_np, ReadInt(settings, "max_np", 0));
  const int total_slots = hosts ? discovery::TotalSlots(*hosts) : 0;
  const RawSetting* host_source = FindSetting(settings, "hosts")
                                      ? FindSetting(settings, "hosts")
                                      : FindSetting(settings, "hostfile");

  if (!spec->elastic()) {
    if (!np && !hosts) {
      return absl::InvalidArgumentError(
          "-np/--num-proc is required when no hosts are given (-H/--hostfile)");
    }
    const int n = np.value_or(total_slots);
    if (hosts && n > total_slots) {
      return absl::InvalidArgumentError(absl::StrCat(Named(settings, "num_proc", n),
                                                     " is more than the ", total_slots,
                                                     " slots of ", host_source->origin));
    }
    spec->set_num_proc(n);
    spec->set_min_np(n);
    spec->set_max_np(n);
    return absl::OkStatus();
  }

  if (!np && !min_np) {
    return absl::InvalidArgumentError("an elastic job needs -np/--num-proc or --min-np");
  }
  const int n = np.value_or(*min_np);
  const int lo = min_np.value_or(n);
  const int hi = max_np.value_or(0);  // 0: no upper limit
  if (hi > 0 && lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        Named(settings, "min_np", lo), " is greater than ", Named(settings, "max_np", hi)));
  }
  if (n < lo || (hi > 0 && n > hi)) {
    return absl::InvalidArgumentError(absl::StrCat(Named(settings, "num_proc", n),
                                                   " is outside [min-np ", lo, ", max-np ",
                                                   hi > 0 ? absl::StrCat(hi) : "unlimited", "]"));
  }
  if (hosts && lo > total_slots) {
    return absl::InvalidArgumentError(absl::StrCat(Named(settings, "min_np", lo),
                                                   " is more than the ", total_slots, " slots of ",
                                                   host_source->origin));
  }
  spec->set_num_proc(n);
  spec->set_min_np(lo);
  spec->set_max_np(hi);
  return absl::OkStatus();
}

absl::Status ReadWorkingDir(const RawSettings& settings, v1::JobSpec* spec) {
  const RawSetting* cwd = FindSetting(settings, "cwd");
  if (cwd == nullptr) {
    spec->set_working_dir(fs::current_path().string());
    return absl::OkStatus();
  }
  const fs::path dir = fs::absolute(cwd->values.front()).lexically_normal();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return InvalidSetting(*cwd, absl::StrCat(dir.string(), ": no such directory"));
  }
  spec->set_working_dir(dir.string());
  return absl::OkStatus();
}

// Horovod's controllers: Gloo is what horovodd runs; MPI and jsrun it does not.
absl::Status ReadController(const RawSettings& settings) {
  for (const char* key : {"mpi", "jsrun"}) {
    if (const RawSetting* given = FindSetting(settings, key)) {
      HVDD_ASSIGN_OR_RETURN(bool on, ReadBool(settings, key));
      if (on) {
        return InvalidSetting(*given, absl::StrCat("horovodd has no MPI or jsrun launcher, its "
                                                   "workers run over Gloo: drop ",
                                                   given->origin, " (or use --gloo, the default)"));
      }
    }
  }
  if (const RawSetting* controller = FindSetting(settings, "controller")) {
    const std::string name = absl::AsciiStrToLower(controller->values.front());
    if (name == "mpi" || name == "jsrun") {
      return InvalidSetting(*controller, absl::StrCat("'", controller->values.front(),
                                                      "': horovodd runs its workers over Gloo "
                                                      "only; use controller: gloo (the default)"));
    }
    if (name != "gloo") {
      return InvalidSetting(*controller,
                            absl::StrCat("no such controller '", controller->values.front(),
                                         "' (gloo is the one horovodd runs)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunOptions> BuildRunOptions(const RawSettings& file, const RawSettings& command_line,
                                           std::vector<std::string> command) {
  if (command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: put the worker command after the options, "
        "e.g. horovodrun -np 2 python train.py");
  }
  const RawSettings settings = Merge(file, command_line);
  HVDD_RETURN_IF_ERROR(ReadController(settings));
  RunOptions options;
  v1::JobSpec& spec = options.spec;
  for (std::string& arg : command) spec.add_argv(std::move(arg));

  HVDD_ASSIGN_OR_RETURN(std::optional<int> slots, ReadInt(settings, "slots_per_host", 1));
  const int slots_per_host = slots.value_or(kDefaultSlotsPerHost);
  if (slots_per_host > discovery::kMaxSlotsPerHost) {
    return InvalidSetting(*FindSetting(settings, "slots_per_host"),
                          absl::StrCat(slots_per_host, " is more than the most a host may have, ",
                                       discovery::kMaxSlotsPerHost));
  }
  spec.mutable_discovery()->set_default_slots(slots_per_host);

  HVDD_ASSIGN_OR_RETURN(const SlurmChoice slurm,
                        ReadSlurmSettings(settings, ProcessEnvironment(), &spec));
  spec.set_elastic(FindSetting(settings, "host_discovery_script") || slurm.explicit_discovery ||
                   FindSetting(settings, "min_np") || FindSetting(settings, "max_np"));
  HVDD_ASSIGN_OR_RETURN(std::optional<HostSet> hosts,
                        ReadHostSource(settings, slots_per_host, &spec));
  HVDD_RETURN_IF_ERROR(ReadJobSize(settings, hosts, &spec));
  if (hosts) {
    for (const discovery::HostSlots& host : *hosts) {
      v1::HostSlots* out = spec.mutable_discovery()->add_hosts();
      out->set_host(host.host);
      out->set_slots(host.slots);
    }
  } else if (spec.discovery().script().empty() && !spec.discovery().slurm()) {
    v1::HostSlots* local = spec.mutable_discovery()->add_hosts();
    local->set_host("localhost");
    local->set_slots(spec.num_proc());
  }

  HVDD_ASSIGN_OR_RETURN(std::optional<int> reset_limit, ReadInt(settings, "reset_limit", 0));
  spec.set_reset_limit(reset_limit.value_or(0));
  HVDD_ASSIGN_OR_RETURN(std::optional<int> hot_spares, ReadInt(settings, "hot_spares", 0));
  spec.set_hot_spares(hot_spares.value_or(0));
  HVDD_RETURN_IF_ERROR(ReadTimeouts(settings, &spec));
  HVDD_RETURN_IF_ERROR(ReadEvictStragglers(settings, &spec));
  HVDD_RETURN_IF_ERROR(ReadWorkingDir(settings, &spec));
  HVDD_RETURN_IF_ERROR(ReadRemoteSettings(settings, &spec));
  // The file's variables first: the command line's win where the names are the same.
  HVDD_RETURN_IF_ERROR(ReadEnv(file, &spec));
  HVDD_RETURN_IF_ERROR(ReadEnv(command_line, &spec));
  // Horovod's tunables after --env: a flag wins over the same variable set by hand, as
  // Horovod's flags win over the environment.
  HVDD_RETURN_IF_ERROR(ReadTunables(settings, &spec, &options.warnings));
  HVDD_RETURN_IF_ERROR(ReadLauncherSettings(settings, &options));
  HVDD_RETURN_IF_ERROR(ReadClientSecurity(settings, &options.security));
  return options;
}

ParseOutcome Error(const absl::Status& status) {
  ParseOutcome outcome;
  outcome.kind = ParseOutcome::Kind::kError;
  outcome.text = absl::StrCat(kErrorPrefix, status.message());
  return outcome;
}

}  // namespace

ParseOutcome ParseRunOptions(int argc, const char* const* argv) {
  std::unique_ptr<CLI::App> app = MakeFlagApp();
  absl::StatusOr<SplitArgs> split = SplitCommandLine(*app, argc, argv);
  if (!split.ok()) return Error(split.status());
  if (split->help || split->version) {
    ParseOutcome outcome;
    outcome.kind = split->help ? ParseOutcome::Kind::kHelp : ParseOutcome::Kind::kVersion;
    if (split->help) outcome.text = app->help();
    return outcome;
  }
  try {
    std::vector<std::string> flags = split->flags;
    std::reverse(flags.begin(), flags.end());  // CLI11 takes the arguments last-first
    app->parse(flags);
  } catch (const CLI::ParseError& e) {
    return Error(absl::InvalidArgumentError(e.what()));
  }

  absl::StatusOr<RawSettings> parsed = CommandLineSettings(*app);
  if (!parsed.ok()) return Error(parsed.status());
  const RawSettings command_line = std::move(*parsed);
  if (FindSetting(command_line, "check_build") != nullptr) {
    // As in Horovod, -cb needs no -np and no command.
    ParseOutcome outcome;
    outcome.kind = ParseOutcome::Kind::kCheckBuild;
    return outcome;
  }
  RawSettings file;
  if (const RawSetting* config = FindSetting(command_line, "config_file")) {
    absl::StatusOr<RawSettings> loaded = LoadConfigFile(config->values.front());
    if (!loaded.ok()) return Error(loaded.status());
    file = std::move(*loaded);
  }
  absl::StatusOr<RunOptions> options =
      BuildRunOptions(file, command_line, std::move(split->command));
  if (!options.ok()) return Error(options.status());
  ParseOutcome outcome;
  outcome.kind = ParseOutcome::Kind::kRun;
  outcome.options = std::move(*options);
  return outcome;
}

}  // namespace horovodd::cli
