#include "cli/horovodrun/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
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
#include "cli/horovodrun/client_settings.h"
#include "cli/horovodrun/config_file.h"
#include "cli/horovodrun/remote_settings.h"
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

// One horovodrun flag. `key` names the setting (and its --config-file key); `display` is how
// error messages name the flag.
struct FlagDef {
  const char* key;
  const char* names;  // for CLI11; "-np" is not a CLI11 name, so SplitCommandLine rewrites it
  const char* display;
  const char* value_text;  // placeholder in the help; empty for on/off flags
  const char* help;
  const char* group;
};

constexpr char kSizeGroup[] = "Job size";
constexpr char kHostsGroup[] = "Hosts (pick one of -H, --hostfile, --host-discovery-script)";
constexpr char kElasticGroup[] = "Elastic behaviour and timeouts";
constexpr char kLaunchGroup[] = "Launcher";
constexpr char kRemoteGroup[] = "Remote hosts (reached over SSH)";
constexpr char kSecurityGroup[] = "Credentials for --daemon";

// Help lines are wrapped by hand: CLI11 indents after each '\n' but does not wrap.
constexpr FlagDef kFlags[] = {
    {"num_proc", "--num-proc", "-np/--num-proc", "N",
     "Workers to start. Default: --min-np when\nelastic, else all slots of -H/--hostfile.",
     kSizeGroup},
    {"min_np", "--min-np", "--min-np", "N",
     "Fewest workers the job runs with (makes\nthe job elastic). Default: -np.", kSizeGroup},
    {"max_np", "--max-np", "--max-np", "N",
     "Most workers the job grows to (makes the\njob elastic). Default: 0 = no limit.", kSizeGroup},
    {"host_discovery_script", "--host-discovery-script", "--host-discovery-script", "PATH",
     "Executable that prints one 'host[:slots]'\nline per usable host (makes the job\nelastic).",
     kHostsGroup},
    {"slots_per_host", "--slots-per-host,--slots", "--slots-per-host", "N",
     "Slots of a host named without ':slots'.\nDefault: 1.", kHostsGroup},
    {"hosts", "-H,--hosts", "-H/--hosts", "LIST",
     "Fixed hosts, 'host1:2,host2:4'. Default,\nwith no host option: localhost, -np slots.",
     kHostsGroup},
    {"hostfile", "--hostfile", "--hostfile", "PATH",
     "File with one 'host slots=N' (or 'host:N')\nper line.", kHostsGroup},
    {"reset_limit", "--reset-limit", "--reset-limit", "N",
     "Membership resets before the job fails.\nDefault: 0 = no limit.", kElasticGroup},
    {"elastic_timeout", "--elastic-timeout", "--elastic-timeout", "SECONDS",
     "How long to wait for --min-np workers.\nDefault: 600.", kElasticGroup},
    {"start_timeout", "--start-timeout", "--start-timeout", "SECONDS",
     "How long a worker may take to start.\nDefault: 30.", kElasticGroup},
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
    {"cwd", "--cwd", "--cwd", "DIR", "Workers' working directory.\nDefault: this directory.",
     kLaunchGroup},
    {"env", "--env", "--env", "NAME=VALUE",
     "Extra environment variable for every worker\n(repeatable).", kLaunchGroup},
    {"ssh_port", "--ssh-port", "--ssh-port", "PORT", "SSH port of the hosts. Default: 22.",
     kRemoteGroup},
    {"ssh_user", "--ssh-user", "--ssh-user", "USER",
     "User to log in as. Default: the current\nuser.", kRemoteGroup},
    {"ssh_identity_file", "--ssh-identity-file", "--ssh-identity-file", "PATH",
     "Private key to log in with. Default: the\nSSH agent's and ~/.ssh/id_*.", kRemoteGroup},
    {"ssh_known_hosts", "--ssh-known-hosts", "--ssh-known-hosts", "FILE",
     "Known host keys. Default: ~/.ssh/known_hosts.", kRemoteGroup},
    {"ssh_host_key_checking", "--ssh-host-key-checking", "--ssh-host-key-checking", "MODE",
     "strict, accept-new (record unknown hosts)\nor off. A changed key is always refused\n"
     "unless off. Default: accept-new.",
     kRemoteGroup},
    {"network_interface", "--network-interface", "--network-interface", "NAME",
     "Interface (e.g. eth0) whose address workers\nbind their rings to on each host.\n"
     "Default: the address of the host's name.",
     kRemoteGroup},
    {"daemon", "--daemon", "--daemon", "ADDRESS",
     "horovodd to submit to, e.g. 127.0.0.1:7070.\nDefault: start one inside horovodrun.",
     kLaunchGroup},
    {"detach", "--detach", "--detach", "", "Submit the job, print its id and return.",
     kLaunchGroup},
    {"token_file", "--token-file", "--token-file", "PATH",
     "Admin token for --daemon. Default:\n$HOROVODD_TOKEN, $HOROVODD_TOKEN_FILE.",
     kSecurityGroup},
    {"tls_ca", "--tls-ca", "--tls-ca", "PATH",
     "CA of the daemon's TLS certificate (turns\non TLS). Default: $HOROVODD_TLS_CA.",
     kSecurityGroup},
    {"tls_cert", "--tls-cert", "--tls-cert", "PATH",
     "Client certificate (mutual TLS).\nDefault: $HOROVODD_TLS_CERT.", kSecurityGroup},
    {"tls_key", "--tls-key", "--tls-key", "PATH", "Its key. Default: $HOROVODD_TLS_KEY.",
     kSecurityGroup},
    {"config_file", "--config-file", "--config-file", "PATH",
     "YAML file with any of these settings, keyed\nby the long flag name in snake_case\n"
     "(min_np: 2, env: {NAME: VALUE}). Flags on\nthe command line override it.",
     kLaunchGroup},
    {"verbose", "--verbose", "--verbose", "", "More output from horovodrun.", kLaunchGroup},
    {"log_level", "--log-level", "--log-level", "LEVEL",
     "trace, debug, info, warning or error.\nDefault: warning.", kLaunchGroup},
};

constexpr char kFooter[] =
    "The first argument that is not an option (or everything after \"--\") starts the\n"
    "worker command; the command's own flags are passed to it untouched.\n"
    "\n"
    "Example: an elastic job of 2 to 8 workers on the hosts a script prints:\n"
    "  horovodrun -np 4 --min-np 2 --max-np 8 \\\n"
    "      --host-discovery-script ./discover_hosts.sh python train.py --epochs 90\n";

// Shows "-np" (which CLI11 cannot register) and a usage line with the worker command.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    return "Usage: horovodrun [OPTIONS] COMMAND [ARGS...]\n";
  }
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (opt->check_lname("num-proc")) return "-np,--num-proc";
    return CLI::Formatter::make_option_name(opt, is_positional);
  }
};

// The flag table as a CLI11 app: it knows each flag's arity and collects the values as text;
// conversion and checks happen below, for the command line and the config file alike.
std::unique_ptr<CLI::App> MakeApp() {
  auto app = std::make_unique<CLI::App>(
      "Runs a (possibly elastic) distributed training job through horovodd.", "horovodrun");
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
    if (std::string(flag.key) == "blacklist_cooldown_range") opt->expected(2);
    if (std::string(flag.key) == "env") {
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
  app->set_help_flag("-h,--help", "Print this help and exit.")->group(kLaunchGroup);
  return app;
}

// Our flags, and the worker command that follows them.
struct SplitArgs {
  std::vector<std::string> flags;  // for CLI11, "-np" already spelled "--num-proc"
  std::vector<std::string> command;
  bool help = false;
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
    if (arg == "-np" || absl::StartsWith(arg, "-np=")) arg = "--num-proc" + arg.substr(3);

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
    split.flags.push_back(arg);
    const int arity = value_attached ? 0 : opt->get_items_expected_max();
    for (int k = 0; k < arity; ++k) {
      if (++i >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat(name == "--num-proc" ? "-np/--num-proc" : name, " needs ",
                         arity == 1 ? "a value" : absl::StrCat(arity, " values"), " (",
                         opt->get_option_text(), ")"));
      }
      split.flags.push_back(argv[i]);
    }
  }
  for (; i < argc; ++i) split.command.push_back(argv[i]);
  if (unknown && !split.help) return *unknown;
  return split;
}

// The command line's settings, in the config file's shape, named as the user typed them.
RawSettings CommandLineSettings(const CLI::App& app) {
  RawSettings settings;
  for (const FlagDef& flag : kFlags) {
    const CLI::Option* opt =
        app.get_option(std::string(flag.names).substr(0, std::string(flag.names).find(',')));
    if (opt->count() == 0) continue;
    settings[flag.key] = RawSetting{flag.display, opt->reduced_results()};
  }
  return settings;
}

// The config file, then the command line over it. A host source given on the command line
// replaces the file's (one place says where hosts come from). Env variables merge by name
// instead, so BuildRunOptions reads them from each layer.
RawSettings Merge(RawSettings file, const RawSettings& command_line) {
  const char* host_keys[] = {"host_discovery_script", "hosts", "hostfile"};
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
  };
  const Timeout timeouts[] = {
      {"elastic_timeout", kDefaultElasticTimeout,
       [](v1::JobSpec* s, double v) { s->set_elastic_timeout_seconds(v); }},
      {"start_timeout", kDefaultStartTimeout,
       [](v1::JobSpec* s, double v) { s->set_start_timeout_seconds(v); }},
      {"discovery_interval", kDefaultDiscoveryInterval,
       [](v1::JobSpec* s, double v) { s->mutable_discovery()->set_interval_seconds(v); }},
      {"discovery_timeout", kDefaultDiscoveryTimeout,
       [](v1::JobSpec* s, double v) { s->mutable_discovery()->set_script_timeout_seconds(v); }},
      {"liveness_timeout", kDefaultLivenessTimeout,
       [](v1::JobSpec* s, double v) { s->set_liveness_timeout_seconds(v); }},
  };
  for (const Timeout& t : timeouts) {
    HVDD_ASSIGN_OR_RETURN(double seconds, ReadSeconds(settings, t.key, t.fallback));
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

absl::StatusOr<RunOptions> BuildRunOptions(const RawSettings& file, const RawSettings& command_line,
                                           std::vector<std::string> command) {
  if (command.empty()) {
    return absl::InvalidArgumentError(
        "no command given: put the worker command after the options, "
        "e.g. horovodrun -np 2 python train.py");
  }
  const RawSettings settings = Merge(file, command_line);
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

  spec.set_elastic(FindSetting(settings, "host_discovery_script") ||
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
  } else if (spec.discovery().script().empty()) {
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
  if (split->help) {
    ParseOutcome outcome;
    outcome.kind = ParseOutcome::Kind::kHelp;
    outcome.text = app->help();
    return outcome;
  }
  try {
    std::vector<std::string> flags = split->flags;
    std::reverse(flags.begin(), flags.end());  // CLI11 takes the arguments last-first
    app->parse(flags);
  } catch (const CLI::ParseError& e) {
    return Error(absl::InvalidArgumentError(e.what()));
  }

  const RawSettings command_line = CommandLineSettings(*app);
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
