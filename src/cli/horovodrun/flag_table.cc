#include "cli/horovodrun/flag_table.h"

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace horovodd::cli {
namespace {

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
    {"network_interface", "--network-interface,--network-interfaces", "--network-interface(s)",
     "NAMES",
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
    {"no_hierarchical_allreduce", "--no-hierarchical-allreduce", "--no-hierarchical-allreduce", "",
     "Explicitly off.", kParamsGroup, "hierarchical_allreduce", "false"},
    {"hierarchical_allgather", "--hierarchical-allgather", "--hierarchical-allgather", "",
     "The same for allgather. (Not acted on\nyet.)", kParamsGroup},
    {"no_hierarchical_allgather", "--no-hierarchical-allgather", "--no-hierarchical-allgather", "",
     "Explicitly off.", kParamsGroup, "hierarchical_allgather", "false"},

    // Autotune.
    {"autotune", "--autotune", "--autotune", "",
     "Tune the parameters above while training.\n(Not acted on yet.)", kAutotuneGroup},
    {"no_autotune", "--no-autotune", "--no-autotune", "", "", kHidden, "autotune", "false"},
    {"autotune_log_file", "--autotune-log-file", "--autotune-log-file", "PATH",
     "CSV log of the trials.", kAutotuneGroup},
    {"autotune_warmup_samples", "--autotune-warmup-samples", "--autotune-warmup-samples", "N",
     "Samples discarded first. Default: 3.", kAutotuneGroup},
    {"autotune_steps_per_sample", "--autotune-steps-per-sample", "--autotune-steps-per-sample", "N",
     "Steps per sample. Default: 10.", kAutotuneGroup},
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
    {"hot_spares", "--hot-spares", "--hot-spares", "N",
     "Spare workers kept started on slots beyond\nthe job's, to take a failed worker's place.\n"
     "Default: 0.",
     kElasticGroup},
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
     "How long a worker may stay silent before\nit is declared lost. Default: 10.", kElasticGroup},

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
    {"stall_check", "--stall-check", "--stall-check", "", "", kHidden, "no_stall_check", "false"},
    {"stall_check_warning_time_seconds", "--stall-check-warning-time-seconds",
     "--stall-check-warning-time-seconds", "SECONDS",
     "Warn of ranks missing a tensor after this\nlong. Default: 60.", kStallGroup},
    {"stall_check_shutdown_time_seconds", "--stall-check-shutdown-time-seconds",
     "--stall-check-shutdown-time-seconds", "SECONDS",
     "Fail the job after this long (if above the\nwarning time). Default: 0 = never.", kStallGroup},
    {"evict_stragglers", "--evict-stragglers", "--evict-stragglers", "FACTOR",
     "In an elastic job, evict a rank slower than\nFACTOR times the others' median for a\n"
     "sustained window. Default: 0 = never.",
     kStallGroup},

    // Library.
    {"mpi_threads_disable", "--mpi-threads-disable", "--mpi-threads-disable", "",
     "MPI only: no effect here.", kLibraryGroup},
    {"no_mpi_threads_disable", "--no-mpi-threads-disable", "--no-mpi-threads-disable", "", "",
     kHidden, "mpi_threads_disable", "false"},
    {"mpi_args", "--mpi-args", "--mpi-args", "ARGS", "MPI only: no effect here.", kLibraryGroup},
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
    {"no_log_hide_timestamp", "--no-log-hide-timestamp", "--no-log-hide-timestamp", "", "", kHidden,
     "log_with_timestamp", "true"},
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
     "(every worker forked here).\nDefault: slurm inside an allocation\n(unless -H names only this "
     "machine),\nelse ssh.",
     kGeneralGroup},
    {"host_discovery", "--host-discovery", "--host-discovery", "slurm",
     "Hosts are the Slurm allocation's usable\nnodes, slots its tasks per node (makes\nthe "
     "job elastic). The default, for a\nfixed-size job, with --launcher slurm and\nno other "
     "host option.",
     kHostsGroup},
    {"daemon", "--daemon", "--daemon", "ADDRESS",
     "horovodd to submit to, e.g. 127.0.0.1:7070,\nor several, comma-separated (HA: the\n"
     "job goes to the leader). Default: start\none inside horovodrun.",
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

constexpr SingleDashAlias kSingleDashAliases[] = {
    {"-np", "--num-proc"},
    {"-cb", "--check-build"},
    {"-hostfile", "--hostfile"},
    {"-prefix-timestamp", "--prefix-output-with-timestamp"},
};

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

}  // namespace

absl::Span<const FlagDef> Flags() { return kFlags; }

absl::Span<const SingleDashAlias> SingleDashAliases() { return kSingleDashAliases; }

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

std::unique_ptr<CLI::App> MakeFlagApp() {
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

}  // namespace horovodd::cli
