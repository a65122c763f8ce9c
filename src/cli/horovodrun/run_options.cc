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
// A stopped worker is found in under 3 s (heartbeats every timeout/4).
constexpr double kDefaultLivenessTimeout = 2;
constexpr int kDefaultSlotsPerHost = 1;

constexpr char kErrorPrefix[] = "horovodrun: error: ";

// One horovodrun flag. `key` names the flag; `setting` the setting it gives (and its
// --config-file key), when that differs: the two flags of an on/off pair give one setting
// (--hierarchical-allreduce true, --no-hierarchical-allreduce false). `display` is how
// error messages name the flag.
struct FlagDef {
  const char* key;
  const char* names;  // for CLI11; "-np" is not a CLI11 name, so SplitCommandLine rewrites it
  const char* display;
  const char* value_text;  // placeholder in the help; empty for on/off flags
  const char* help;
  const char* group;        // empty: accepted, left out of the help (as Horovod hides it)
  const char* setting = nullptr;     // nullptr: key
  const char* flag_value = "true";   // what an on/off flag sets: "true", or "false" for --no-x
};

// Horovod's groups, in its parser's order, then ours.
constexpr char kGeneralGroup[] = "General";
constexpr char kSshGroup[] = "SSH (remote hosts)";
constexpr char kParamsGroup[] = "Tuneable parameters (HOROVOD_* in every worker's environment)";
constexpr char kAutotuneGroup[] = "Autotune";
constexpr char kElasticGroup[] = "Elastic";
constexpr char kTimelineGroup[] = "Timeline";
constexpr char kStallGroup[] = "Stall check";
constexpr char kLibraryGroup[] = "Library";
constexpr char kLoggingGroup[] = "Logging";
constexpr char kHostsGroup[] = "Hosts (pick one of -H, --hostfile, --host-discovery-script)";
constexpr char kControllerGroup[] = "Controller";
constexpr char kDaemonGroup[] = "horovodd (the daemon that runs the job)";
constexpr char kHidden[] = "";

// Help lines are wrapped by hand: CLI11 indents after each '\n' but does not wrap.
constexpr FlagDef kFlags[] = {
    // General.
    {"version", "-v,--version", "-v/--version", "", "Print horovodrun's version and exit.",
     kGeneralGroup},
    {"num_proc", "--num-proc", "-np/--num-proc", "N",
     "Workers to start. Default: --min-np when\nelastic, else all slots of -H/--hostfile.",
     kGeneralGroup},
    {"check_build", "--check-build", "-cb/--check-build", "",
     "Print which frameworks, controllers and\ntensor operations are built, and exit.",
     kGeneralGroup},
    {"disable_cache", "--disable-cache", "--disable-cache", "",
     "Accepted; horovodd keeps no cache of\nstart-up checks to disable.", kGeneralGroup},
    {"start_timeout", "--start-timeout", "--start-timeout", "SECONDS",
     "How long a worker may take to start.\nDefault: 30 (or $HOROVOD_START_TIMEOUT).",
     kGeneralGroup},
    {"network_interface", "--network-interface,--network-interfaces",
     "--network-interface(s)", "NAMES",
     "Interfaces (eth0 or 'eth0,eth1'; repeatable)\nfor the workers: rings bind to the first's\n"
     "address (HOROVOD_GLOO_IFACE), NCCL gets\nall (NCCL_SOCKET_IFNAME). Default: the\n"
     "address of the host's name.",
     kGeneralGroup},
    {"output_filename", "--output-filename", "--output-filename", "DIR",
     "Also write each rank's output to\nDIR/rank.<rank>/stdout and .../stderr.", kGeneralGroup},
    {"verbose", "--verbose", "--verbose", "", "More output from horovodrun.", kGeneralGroup},
    {"config_file", "--config-file", "--config-file", "PATH",
     "YAML file with these settings: Horovod's\nsections (params, autotune, timeline,\n"
     "stall_check, library_options, logging) or\nany long flag name in snake_case (min_np:\n"
     "2, env: {NAME: VALUE}). Flags on the\ncommand line override it.",
     kGeneralGroup},

    // SSH.
    {"ssh_port", "-p,--ssh-port", "-p/--ssh-port", "PORT", "SSH port of the hosts. Default: 22.",
     kSshGroup},
    {"ssh_identity_file", "-i,--ssh-identity-file", "-i/--ssh-identity-file", "PATH",
     "Private key to log in with. Default: the\nSSH agent's and ~/.ssh/id_*.", kSshGroup},
    {"ssh_user", "--ssh-user", "--ssh-user", "USER",
     "User to log in as. Default: the current\nuser.", kSshGroup},
    {"ssh_known_hosts", "--ssh-known-hosts", "--ssh-known-hosts", "FILE",
     "Known host keys. Default: ~/.ssh/known_hosts.", kSshGroup},
    {"ssh_host_key_checking", "--ssh-host-key-checking", "--ssh-host-key-checking", "MODE",
     "strict, accept-new (record unknown hosts)\nor off. A changed key is always refused\n"
     "unless off. Default: accept-new.",
     kSshGroup},

    // Tuneable parameters.
    {"fusion_threshold_mb", "--fusion-threshold-mb", "--fusion-threshold-mb", "MB",
     "Most tensor data fused into one batch; 0\ndisables fusion. Default: 128.", kParamsGroup},
    {"cycle_time_ms", "--cycle-time-ms", "--cycle-time-ms", "MS",
     "Delay between fusion cycles. Default: 1.", kParamsGroup},
    {"cache_capacity", "--cache-capacity", "--cache-capacity", "N",
     "Tensor names cached to save negotiation.\n(Not acted on yet.)", kParamsGroup},
    {"hierarchical_allreduce", "--hierarchical-allreduce", "--hierarchical-allreduce", "",
     "Allreduce within each host first, then\nacross hosts.", kParamsGroup},
    {"no_hierarchical_allreduce", "--no-hierarchical-allreduce", "--no-hierarchical-allreduce",
     "", "Explicitly off.", kParamsGroup, "hierarchical_allreduce", "false"},
    {"hierarchical_allgather", "--hierarchical-allgather", "--hierarchical-allgather", "",
     "The same for allgather. (Not acted on\nyet.)", kParamsGroup},
    {"no_hierarchical_allgather", "--no-hierarchical-allgather", "--no-hierarchical-allgather",
     "", "Explicitly off.", kParamsGroup, "hierarchical_allgather", "false"},

    // Autotune.
    {"autotune", "--autotune", "--autotune", "",
     "Tune the parameters above while training.\n(Not acted on yet.)", kAutotuneGroup},
    {"no_autotune", "--no-autotune", "--no-autotune", "", "", kHidden, "autotune", "false"},
    {"autotune_log_file", "--autotune-log-file", "--autotune-log-file", "PATH",
     "CSV log of the trials.", kAutotuneGroup},
    {"autotune_warmup_samples", "--autotune-warmup-samples", "--autotune-warmup-samples", "N",
     "Samples discarded first. Default: 3.", kAutotuneGroup},
    {"autotune_steps_per_sample", "--autotune-steps-per-sample", "--autotune-steps-per-sample",
     "N", "Steps per sample. Default: 10.", kAutotuneGroup},
    {"autotune_bayes_opt_max_samples", "--autotune-bayes-opt-max-samples",
     "--autotune-bayes-opt-max-samples", "N",
     "Most samples per Bayesian optimisation.\nDefault: 20.", kAutotuneGroup},
    {"autotune_gaussian_process_noise", "--autotune-gaussian-process-noise",
     "--autotune-gaussian-process-noise", "X", "Noise regularisation in [0, 1]. Default: 0.8.",
     kAutotuneGroup},

    // Elastic.
    {"min_np", "--min-np,--min-num-proc", "--min-np", "N",
     "Fewest workers the job runs with (makes\nthe job elastic). Default: -np.", kElasticGroup},
    {"max_np", "--max-np,--max-num-proc", "--max-np", "N",
     "Most workers the job grows to (makes the\njob elastic). Default: 0 = no limit.",
     kElasticGroup},
    {"slots_per_host", "--slots-per-host,--slots", "--slots-per-host", "N",
     "Slots of a host named without ':slots'.\nDefault: 1.", kElasticGroup},
    {"elastic_timeout", "--elastic-timeout", "--elastic-timeout", "SECONDS",
     "How long to wait for --min-np workers.\nDefault: 600 (or $HOROVOD_ELASTIC_TIMEOUT).",
     kElasticGroup},
    {"reset_limit", "--reset-limit", "--reset-limit", "N",
     "Membership resets before the job fails.\nDefault: 0 = no limit.", kElasticGroup},
    {"blacklist_cooldown_range", "--blacklist-cooldown-range", "--blacklist-cooldown-range",
     "LO HI",
     "A failing host is blacklisted for LO*2^n\nseconds on its n-th failure, at most HI.\n"
     "Default: none = for good.",
     kElasticGroup},
    {"discovery_interval", "--discovery-interval", "--discovery-interval", "SECONDS",
     "How often the discovery script runs.\nDefault: 1.", kElasticGroup},
    {"discovery_timeout", "--discovery-timeout", "--discovery-timeout", "SECONDS",
     "How long one discovery run may take.\nDefault: 10.", kElasticGroup},
    {"liveness_timeout", "--liveness-timeout", "--liveness-timeout", "SECONDS",
     "How long a worker may stay silent before\nit is declared lost. Default: 2.", kElasticGroup},

    // Timeline.
    {"timeline_filename", "--timeline-filename", "--timeline-filename", "FILE",
     "Write a Chrome trace of the collectives\n(HOROVOD_TIMELINE).", kTimelineGroup},
    {"timeline_mark_cycles", "--timeline-mark-cycles", "--timeline-mark-cycles", "",
     "Mark the engine's cycles on it.", kTimelineGroup},
    {"no_timeline_mark_cycles", "--no-timeline-mark-cycles", "--no-timeline-mark-cycles", "", "",
     kHidden, "timeline_mark_cycles", "false"},

    // Stall check.
    {"no_stall_check", "--no-stall-check", "--no-stall-check", "", "Disable the stall check.",
     kStallGroup},
    {"stall_check", "--stall-check", "--stall-check", "", "", kHidden, "no_stall_check",
     "false"},
    {"stall_check_warning_time_seconds", "--stall-check-warning-time-seconds",
     "--stall-check-warning-time-seconds", "SECONDS",
     "Warn of ranks missing a tensor after this\nlong. Default: 60.", kStallGroup},
    {"stall_check_shutdown_time_seconds", "--stall-check-shutdown-time-seconds",
     "--stall-check-shutdown-time-seconds", "SECONDS",
     "Fail the job after this long (if above the\nwarning time). Default: 0 = never.",
     kStallGroup},

    // Library.
    {"mpi_threads_disable", "--mpi-threads-disable", "--mpi-threads-disable", "",
     "MPI only: no effect here.", kLibraryGroup},
    {"no_mpi_threads_disable", "--no-mpi-threads-disable", "--no-mpi-threads-disable", "", "",
     kHidden, "mpi_threads_disable", "false"},
    {"mpi_args", "--mpi-args", "--mpi-args", "ARGS", "MPI only: no effect here.",
     kLibraryGroup},
    {"tcp", "--tcp", "--tcp", "", "TCP only: NCCL leaves InfiniBand alone\n(NCCL_IB_DISABLE=1).",
     kLibraryGroup},
    {"binding_args", "--binding-args", "--binding-args", "ARGS", "MPI only: no effect here.",
     kLibraryGroup},
    {"num_nccl_streams", "--num-nccl-streams", "--num-nccl-streams", "N",
     "NCCL streams. (Not acted on yet.)", kLibraryGroup},
    {"thread_affinity", "--thread-affinity", "--thread-affinity", "CORE",
     "Pin the background thread. (Not acted\non yet.)", kLibraryGroup},
    {"gloo_timeout_seconds", "--gloo-timeout-seconds", "--gloo-timeout-seconds", "SECONDS",
     "How long a collective may wait for its\npeers. Default: 30.", kLibraryGroup},

    // Logging.
    {"log_level", "--log-level", "--log-level", "LEVEL",
     "trace, debug, info, warning, error or fatal\n(also HOROVOD_LOG_LEVEL). Default: warning.",
     kLoggingGroup},
    {"log_with_timestamp", "--log-with-timestamp", "--log-with-timestamp", "",
     "Timestamps in workers' own log lines.", kLoggingGroup},
    {"log_without_timestamp", "--log-without-timestamp", "--log-without-timestamp", "",
     "Without them (HOROVOD_LOG_HIDE_TIME=1;\nnot acted on yet).", kLoggingGroup,
     "log_with_timestamp", "false"},
    {"log_hide_timestamp", "--log-hide-timestamp", "--log-hide-timestamp", "", "", kHidden,
     "log_with_timestamp", "false"},
    {"no_log_hide_timestamp", "--no-log-hide-timestamp", "--no-log-hide-timestamp", "", "",
     kHidden, "log_with_timestamp", "true"},
    {"prefix_output_with_timestamp", "--prefix-output-with-timestamp",
     "-prefix-timestamp/--prefix-output-with-timestamp", "",
     "Start each output line with the time.", kLoggingGroup},

    // Hosts.
    {"hosts", "-H,--hosts", "-H/--hosts", "LIST",
     "Fixed hosts, 'host1:2,host2:4'. Default,\nwith no host option: localhost, -np slots.",
     kHostsGroup},
    {"hostfile", "--hostfile", "-hostfile/--hostfile", "PATH",
     "File with one 'host slots=N' (or 'host:N')\nper line.", kHostsGroup},
    {"host_discovery_script", "--host-discovery-script", "--host-discovery-script", "PATH",
     "Executable that prints one 'host[:slots]'\nline per usable host (makes the job\nelastic).",
     kHostsGroup},

    // Controller.
    {"gloo", "--gloo", "--gloo", "", "Gloo controller: horovodd's only one.", kControllerGroup},
    {"mpi", "--mpi", "--mpi", "", "Not supported: use --gloo (the default).", kControllerGroup},
    {"jsrun", "--jsrun", "--jsrun", "", "Not supported: use --gloo (the default).",
     kControllerGroup},

    // horovodd's own.
    {"cwd", "--cwd", "--cwd", "DIR", "Workers' working directory.\nDefault: this directory.",
     kDaemonGroup},
    {"env", "--env", "--env", "NAME=VALUE",
     "Extra environment variable for every worker\n(repeatable).", kDaemonGroup},
    // Slurm (slurm_settings.h).
    {"launcher", "--launcher", "--launcher", "NAME",
     "slurm (each worker an srun step), ssh\n(this machine forked, others over SSH)\nor local "
     "(every worker forked here).\nDefault: slurm inside an allocation\n(unless -H names only this machine),\nelse ssh.",
     kGeneralGroup},
    {"host_discovery", "--host-discovery", "--host-discovery", "slurm",
     "Hosts are the Slurm allocation's usable\nnodes, slots its tasks per node (makes\nthe "
     "job elastic). The default, for a\nfixed-size job, with --launcher slurm and\nno other "
     "host option.",
     kHostsGroup},
    {"daemon", "--daemon", "--daemon", "ADDRESS",
     "horovodd to submit to, e.g. 127.0.0.1:7070.\nDefault: start one inside horovodrun.",
     kDaemonGroup},
    {"detach", "--detach", "--detach", "", "Submit the job, print its id and return.",
     kDaemonGroup},
    {"token_file", "--token-file", "--token-file", "PATH",
     "Admin token for --daemon. Default:\n$HOROVODD_TOKEN, $HOROVODD_TOKEN_FILE.", kDaemonGroup},
    {"tls_ca", "--tls-ca", "--tls-ca", "PATH",
     "CA of the daemon's TLS certificate (turns\non TLS). Default: $HOROVODD_TLS_CA.",
     kDaemonGroup},
    {"tls_cert", "--tls-cert", "--tls-cert", "PATH",
     "Client certificate (mutual TLS).\nDefault: $HOROVODD_TLS_CERT.", kDaemonGroup},
    {"tls_key", "--tls-key", "--tls-key", "PATH", "Its key. Default: $HOROVODD_TLS_KEY.",
     kDaemonGroup},
};

// Horovod's flags spelled with one dash and several letters, which CLI11 cannot register:
// SplitCommandLine rewrites them, the help shows them.
struct SingleDashAlias {
  const char* alias;
  const char* long_name;
};
constexpr SingleDashAlias kSingleDashAliases[] = {
    {"-np", "--num-proc"},
    {"-cb", "--check-build"},
    {"-hostfile", "--hostfile"},
    {"-prefix-timestamp", "--prefix-output-with-timestamp"},
};

// How messages name the flag CLI11 knows as `name` ("--num-proc" -> "-np/--num-proc").
std::string DisplayName(const std::string& name) {
  for (const FlagDef& flag : kFlags) {
    for (absl::string_view each : absl::StrSplit(flag.names, ',')) {
      if (each == name) return flag.display;
    }
  }
  return name;
}

std::string SettingOf(const FlagDef& flag) {
  return flag.setting != nullptr ? flag.setting : flag.key;
}

constexpr char kFooter[] =
    "The first argument that is not an option (or everything after \"--\") starts the\n"
    "worker command; the command's own flags are passed to it untouched.\n"
    "\n"
    "Example: an elastic job of 2 to 8 workers on the hosts a script prints:\n"
    "  horovodrun -np 4 --min-np 2 --max-np 8 \\\n"
    "      --host-discovery-script ./discover_hosts.sh python train.py --epochs 90\n";

// Shows the one-dash spellings (which CLI11 cannot register) and a usage line with the
// worker command.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    return "Usage: horovodrun [OPTIONS] COMMAND [ARGS...]\n";
  }
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    for (const SingleDashAlias& alias : kSingleDashAliases) {
      if (opt->check_lname(std::string(alias.long_name).substr(2))) {
        return absl::StrCat(alias.alias, ",", alias.long_name);
      }
    }
    return CLI::Formatter::make_option_name(opt, is_positional);
  }
};

// The flag table as a CLI11 app: it knows each flag's arity and collects the values as text;
// conversion and checks happen below, for the command line and the config file alike.
std::unique_ptr<CLI::App> MakeApp() {
  auto app = std::make_unique<CLI::App>(
      "Runs a (possibly elastic) distributed training job through horovodd.\n"
      "Takes Horovod 0.28's horovodrun command line.",
      "horovodrun");
  auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(36);
  app->formatter(formatter);
  app->footer(kFooter);
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->set_help_flag();  // re-added after the flags, so that the help lists groups in order
  for (const FlagDef& flag : kFlags) {
    CLI::Option* opt = std::string(flag.value_text).empty()
                           ? app->add_flag(flag.names, flag.help)
                           : app->add_option(flag.names, flag.help)->option_text(flag.value_text);
    opt->group(flag.group);
    const std::string key = flag.key;
    if (key == "blacklist_cooldown_range") opt->expected(2);
    if (key == "env" || key == "network_interface") {
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
  app->set_help_flag("-h,--help", "Print this help and exit.")->group(kGeneralGroup);
  return app;
}

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
    for (const SingleDashAlias& alias : kSingleDashAliases) {
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
        return absl::InvalidArgumentError(
            absl::StrCat(DisplayName(name), " needs ",
                         arity == 1 ? "a value" : absl::StrCat(arity, " values"), " (",
                         opt->get_option_text(), ")"));
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
  for (const FlagDef& flag : kFlags) {
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
       [](v1::JobSpec* s, double v) { s->set_start_timeout_seconds(v); },
       "HOROVOD_START_TIMEOUT"},
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
                                                   given->origin,
                                                   " (or use --gloo, the default)"));
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
  HVDD_RETURN_IF_ERROR(ReadTimeouts(settings, &spec));
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
  std::unique_ptr<CLI::App> app = MakeApp();
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
