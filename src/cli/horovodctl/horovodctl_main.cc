// horovodctl: the operator's view of a running horovodd. Lists jobs, shows a
// job's status, watches its events live, tails a rank's output, cancels jobs,
// drains hosts and stops the daemon (`stop`). Human tables by default,
// --output json for scripts.
// Exit codes: 0 success, 1 an error (one "horovodctl: error: ..." line; for
// `watch`, also a job that did not succeed), 2 bad usage.
#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/client_credentials.h"
#include "cli/horovodctl/horovodctl_client.h"
#include "cli/horovodctl/horovodctl_commands.h"

namespace {

using horovodd::cli::CommandContext;

constexpr char kDefaultAddress[] = "127.0.0.1:7451";  // horovodd's default --listen

std::string UserName() {
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  return absl::StrCat("uid ", getuid());
}

struct GlobalOptions {
  std::string address = kDefaultAddress;
  horovodd::cli::ClientSecurity security;
  std::string output = "table";
  double timeout_seconds = 10;
};

// What the chosen command needs; filled by CLI11 while parsing.
struct CommandArgs {
  std::string job_id;
  std::string host;
  int rank = 0;
  int lines = 100;
  horovodd::cli::WatchFilter watch;
  std::string reason = absl::StrCat("cancelled by ", UserName(), " with horovodctl");
  bool wait = false;
  bool stop_jobs = false;
  std::string stop_reason = absl::StrCat("horovodd stopped by ", UserName(), " with horovodctl");
};

// Credentials: flags, else the environment (see client_credentials.h).
void AddSecurityOptions(CLI::App& app, horovodd::cli::ClientSecurity& security) {
  app.add_option("--token-file", security.token_file,
                 "File holding the daemon's admin (or viewer) token (default: $HOROVODD_TOKEN, "
                 "else $HOROVODD_TOKEN_FILE, else /var/lib/horovodd/admin.token if readable)");
  app.add_option("--tls-ca", security.tls_ca,
                 "CA certificate (PEM) the daemon's certificate is checked against; turns on TLS "
                 "(default: $HOROVODD_TLS_CA)");
  app.add_option("--tls-cert", security.tls_cert,
                 "Client certificate (PEM) for a daemon that asks for one (mutual TLS) "
                 "(default: $HOROVODD_TLS_CERT)");
  app.add_option("--tls-key", security.tls_key,
                 "Private key of --tls-cert (default: $HOROVODD_TLS_KEY)");
}

using Runner = std::function<absl::StatusOr<int>(const CommandContext&)>;

// absl::Status -> exit code 0; errors are printed by main.
absl::StatusOr<int> ExitZero(absl::Status status) {
  if (!status.ok()) return status;
  return 0;
}

// CLI11's own range check prints its bounds as 300-digit doubles.
CLI::Validator RankValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int rank = 0;
        if (absl::SimpleAtoi(text, &rank) && rank >= 0) return "";
        return absl::StrCat("a rank is an integer >= 0, got '", text, "'");
      },
      "RANK>=0");
}

void AddJobArg(CLI::App* command, CommandArgs& args, const std::string& what) {
  command->add_option("JOB", args.job_id, what)->required();
}

// Builds the subcommands; `runners` maps each to what it does.
void AddCommands(CLI::App& app, CommandArgs& args, std::map<CLI::App*, Runner>& runners) {
  using namespace horovodd::cli;
  auto* list = app.add_subcommand("list", "List the daemon's jobs, running and ended.");
  runners[list] = [](const CommandContext& ctx) { return ExitZero(ListJobs(ctx)); };

  auto* status = app.add_subcommand(
      "status", "Show one job: state, generation, workers, hosts, resets, recent events.");
  AddJobArg(status, args, "Job id, as `list` shows it");
  runners[status] = [&args](const CommandContext& ctx) {
    return ExitZero(ShowJob(ctx, args.job_id));
  };

  auto* watch = app.add_subcommand(
      "watch",
      "Print the job's membership changes, warnings and state changes as they happen,\n"
      "until it ends. Exit code 0 if the job succeeded, 1 otherwise.");
  AddJobArg(watch, args, "Job id, as `list` shows it");
  watch->add_flag("--info", args.watch.info,
                  "Also print what the daemon did (workers started, left, ...)");
  watch->add_flag("--output-lines", args.watch.output_lines, "Also print the workers' output");
  runners[watch] = [&args](const CommandContext& ctx) {
    return WatchJob(ctx, args.job_id, args.watch);
  };

  auto* logs = app.add_subcommand("logs", "Print the newest output lines of one rank.");
  AddJobArg(logs, args, "Job id, as `list` shows it");
  logs->add_option("RANK", args.rank, "Rank whose output to print")
      ->required()
      ->check(RankValidator());
  logs->add_option("-n,--lines", args.lines, "How many of the newest lines (at most 10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  runners[logs] = [&args](const CommandContext& ctx) {
    return ExitZero(ShowLogs(ctx, args.job_id, args.rank, args.lines));
  };

  auto* cancel = app.add_subcommand("cancel", "Cancel a job: its workers are stopped.");
  AddJobArg(cancel, args, "Job id, as `list` shows it");
  cancel->add_option("--reason", args.reason, "Why; recorded as the job's end reason")
      ->capture_default_str();
  cancel->add_flag("--wait", args.wait, "Return only once the job has ended");
  runners[cancel] = [&args](const CommandContext& ctx) {
    return ExitZero(CancelJob(ctx, {args.job_id, args.reason, args.wait}));
  };

  auto* hosts = app.add_subcommand(
      "hosts", "List the hosts of the running jobs: slots, state, cooldown left.");
  runners[hosts] = [](const CommandContext& ctx) { return ExitZero(ShowHosts(ctx)); };

  auto* stop = app.add_subcommand(
      "stop",
      "Stop the daemon, as SIGTERM does (systemctl stop). Its running jobs keep\n"
      "running for the next horovodd on the same state dir, unless --stop-jobs\n"
      "(or shutdown.stop_jobs in its config) ends them first (CANCELLED).");
  stop->add_flag("--stop-jobs", args.stop_jobs,
                 "End the running jobs first, their workers stopped, nothing left running");
  stop->add_option("--reason", args.stop_reason,
                   "Recorded as the ended jobs' reason (with --stop-jobs)")
      ->capture_default_str();
  runners[stop] = [&args](const CommandContext& ctx) {
    return ExitZero(StopDaemon(ctx, args.stop_jobs, args.stop_reason));
  };

  for (bool drained : {true, false}) {
    auto* command = app.add_subcommand(
        drained ? "drain" : "undrain",
        drained ? "Drain a host: its workers leave at their next commit and no new ones start "
                  "there."
                : "Undrain a host: workers may start there again.");
    command->add_option("HOST", args.host, "Host name, as the job's hosts list it")->required();
    command->add_option("--job", args.job_id, "Only in this job (default: every running job)");
    runners[command] = [&args, drained](const CommandContext& ctx) {
      return ExitZero(SetDrained(ctx, args.host, args.job_id, drained));
    };
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"horovodctl: look at and steer the jobs of a running horovodd.", "horovodctl"};
  app.require_subcommand(1);
  // Global options are accepted after the command too (`status JOB --output json`).
  app.fallthrough();
  app.footer(
      absl::StrCat("Run `horovodctl COMMAND --help` for a command's options.\n"
                   "Exit codes: 0 success, 1 error (or, for watch, a job that did not "
                   "succeed), 2 bad usage."));
  GlobalOptions global;
  app.add_option("--daemon", global.address,
                 absl::StrCat("horovodd to talk to, host:port, or several (host:port,host:port) "
                              "for an HA setup: reads are answered by any of them, writes are "
                              "sent on to the leader (default: $HOROVODD_ADDRESS, else ",
                              kDefaultAddress, ")"))
      ->envname("HOROVODD_ADDRESS");
  app.add_option("-o,--output", global.output, "table (for people) or json (for scripts)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--timeout", global.timeout_seconds, "Seconds to wait for each answer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddSecurityOptions(app, global.security);

  CommandArgs args;
  std::map<CLI::App*, Runner> runners;
  AddCommands(app, args, runners);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string what = e.what();
    // CLI11 calls a misspelt command a missing one; name what was typed instead.
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      what = absl::StrCat("unknown command '", app.remaining().front(),
                          "' (commands: list, status, watch, logs, cancel, hosts, drain, "
                          "undrain, stop)");
    }
    std::cerr << "horovodctl: error: " << what << " (see horovodctl --help)" << std::endl;
    return 2;
  }

  auto addresses = horovodd::cli::SplitDaemonAddresses(global.address);
  if (!addresses.ok()) {
    std::cerr << "horovodctl: error: --daemon: " << addresses.status().message() << std::endl;
    return 2;
  }
  // Credentials are checked once, before any daemon is tried.
  if (auto checked = horovodd::cli::ConnectToDaemon(addresses->front(), global.security);
      !checked.ok()) {
    std::cerr << "horovodctl: error: " << checked.status().message() << std::endl;
    return 2;
  }
  horovodd::cli::FollowOptions follow;
  follow.addresses = *addresses;
  horovodd::cli::LeaderFollower daemons(follow, [&global](const std::string& address) {
    return *horovodd::cli::ConnectToDaemon(address, global.security);
  });
  horovodd::cli::JobClient client({absl::Seconds(global.timeout_seconds)}, &daemons);
  CommandContext ctx;
  ctx.client = &client;
  ctx.format = global.output == "json" ? horovodd::cli::OutputFormat::kJson
                                       : horovodd::cli::OutputFormat::kTable;
  ctx.out = &std::cout;
  absl::StatusOr<int> result = runners.at(app.get_subcommands().front())(ctx);
  if (!result.ok()) {
    std::cout.flush();
    std::cerr << "horovodctl: error: " << result.status().message() << std::endl;
    return 1;
  }
  return *result;
}
