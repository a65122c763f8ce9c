// horovodrun's flags and config file: what a user types, and the JobSpec (or the one-line
// error) they get.
#include "run_options_test_support.h"

namespace horovodd::cli {
namespace {

using namespace test_support;  // NOLINT: test helpers

TEST_CASE("everything from the first positional argument is the worker command") {
  RunOptions o = ParseOk({"-np", "2", "./train", "--epochs", "3", "--lr", "0.1"});
  CHECK(Argv(o.spec) == std::vector<std::string>{"./train", "--epochs", "3", "--lr", "0.1"});
  CHECK(o.spec.num_proc() == 2);

  // The command's own flags keep their meaning even when they look like ours.
  o = ParseOk({"-np", "2", "python", "train.py", "-np", "9", "-H", "x", "--help", "--bogus"});
  CHECK(Argv(o.spec) ==
        std::vector<std::string>{"python", "train.py", "-np", "9", "-H", "x", "--help", "--bogus"});
  CHECK(o.spec.num_proc() == 2);
  CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"localhost", 2}});
}

TEST_CASE("-- ends our flags, even before a command that starts with a dash") {
  RunOptions o = ParseOk({"-np", "3", "--", "./train", "--", "-np", "1"});
  CHECK(Argv(o.spec) == std::vector<std::string>{"./train", "--", "-np", "1"});
  CHECK(o.spec.num_proc() == 3);

  o = ParseOk({"-np", "1", "--", "-weird-name"});
  CHECK(Argv(o.spec) == std::vector<std::string>{"-weird-name"});
}

TEST_CASE("a fixed job gets Horovod's defaults") {
  RunOptions o = ParseOk({"-np", "4", "./train"});
  const v1::JobSpec& s = o.spec;
  CHECK_FALSE(s.elastic());
  CHECK(s.num_proc() == 4);
  CHECK(s.min_np() == 4);
  CHECK(s.max_np() == 4);
  CHECK(Hosts(s) == std::vector<std::pair<std::string, int>>{{"localhost", 4}});
  CHECK(s.discovery().script().empty());
  CHECK(s.discovery().default_slots() == 1);
  CHECK(s.discovery().interval_seconds() == 1);
  CHECK(s.discovery().script_timeout_seconds() == 10);
  CHECK(s.reset_limit() == 0);
  CHECK(s.elastic_timeout_seconds() == 600);
  CHECK(s.start_timeout_seconds() == 30);
  // No range: Horovod's default, a failing host is blacklisted for the rest of the job.
  CHECK(s.blacklist_cooldown_min_seconds() == 0);
  CHECK(s.blacklist_cooldown_max_seconds() == 0);
  CHECK(s.liveness_timeout_seconds() == 10);
  CHECK(s.working_dir() == fs::current_path().string());
  CHECK(s.env().empty());
  CHECK(o.daemon_address.empty());
  CHECK_FALSE(o.verbose);
  CHECK_FALSE(o.detach);
  CHECK(o.log_level == "warning");
}

TEST_CASE("values may be attached with '=' or, for -H, directly") {
  CHECK(ParseOk({"-np=3", "./t"}).spec.num_proc() == 3);
  CHECK(ParseOk({"--num-proc=5", "./t"}).spec.num_proc() == 5);
  CHECK(Hosts(ParseOk({"-Hnode1:2", "./t"}).spec) ==
        std::vector<std::pair<std::string, int>>{{"node1", 2}});
  CHECK(Hosts(ParseOk({"--hosts=a:1,b:1", "./t"}).spec) ==
        std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 1}});
  // Repeating a flag keeps the last value, as Horovod's argparse does.
  CHECK(ParseOk({"-np", "2", "-np", "6", "./t"}).spec.num_proc() == 6);
}

TEST_CASE("-H sets a fixed job over those hosts") {
  RunOptions o = ParseOk({"-H", "a:2,b:4", "./train"});
  CHECK_FALSE(o.spec.elastic());
  CHECK(o.spec.num_proc() == 6);  // np defaults to all slots
  CHECK(o.spec.min_np() == 6);
  CHECK(o.spec.max_np() == 6);
  CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"a", 2}, {"b", 4}});

  CHECK(ParseOk({"-np", "3", "-H", "a:2,b:4", "./train"}).spec.num_proc() == 3);

  // Hosts named without slots get 1, or --slots-per-host (alias --slots).
  CHECK(Hosts(ParseOk({"-H", "a,b", "./t"}).spec) ==
        std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 1}});
  CHECK(Hosts(ParseOk({"-H", "a,b:5", "--slots-per-host", "3", "./t"}).spec) ==
        std::vector<std::pair<std::string, int>>{{"a", 3}, {"b", 5}});
  RunOptions slots = ParseOk({"--slots", "2", "-H", "a", "./t"});
  CHECK(Hosts(slots.spec) == std::vector<std::pair<std::string, int>>{{"a", 2}});
  CHECK(slots.spec.discovery().default_slots() == 2);
}

TEST_CASE("a fixed job cannot ask for more workers than its hosts have slots") {
  RequireError({"-np", "7", "-H", "a:2,b:4", "./train"}, {"-np/--num-proc 7", "6 slots", "-H"});
}

TEST_CASE("a malformed host list is rejected with the flag and the list") {
  RequireError({"-H", "a:zero", "./t"}, {"-H/--hosts", "a:zero"});
  RequireError({"-H", "", "./t"}, {"-H/--hosts"});
}

TEST_CASE("--hostfile reads Horovod's hostfile format") {
  TempDir dir;
  const std::string file = dir.Write("hosts", "# cluster\nnode1 slots=2\nnode2:3\nnode3\n");
  RunOptions o = ParseOk({"--hostfile", file, "./train"});
  CHECK(Hosts(o.spec) ==
        std::vector<std::pair<std::string, int>>{{"node1", 2}, {"node2", 3}, {"node3", 1}});
  CHECK(o.spec.num_proc() == 6);
  CHECK_FALSE(o.spec.elastic());

  RequireError({"--hostfile", (dir.path() / "absent").string(), "./t"},
               {"--hostfile", "absent", "No such file"});
  const std::string bad = dir.Write("bad", "node1 slots=2\nnode2 slots=lots\n");
  RequireError({"--hostfile", bad, "./t"}, {"--hostfile", bad, "line 2"});
  RequireError({"--hostfile", dir.Write("empty", "# nobody\n"), "./t"}, {"--hostfile", "no hosts"});
  RequireError({"--hostfile", dir.path().string(), "./t"}, {"--hostfile", "is a directory"});
}

TEST_CASE("a fixed job without hosts needs -np") { RequireError({"./train"}, {"-np/--num-proc"}); }

TEST_CASE("a discovery script makes the job elastic, with its absolute path") {
  TempDir dir;
  const std::string script = dir.Write("discover.sh", kScript, /*executable=*/true);
  RunOptions o = ParseOk(
      {"-np", "2", "--min-np", "1", "--max-np", "4", "--host-discovery-script", script, "./t"});
  CHECK(o.spec.elastic());
  CHECK(o.spec.discovery().script() == script);
  CHECK(o.spec.discovery().hosts().empty());
  CHECK(o.spec.num_proc() == 2);
  CHECK(o.spec.min_np() == 1);
  CHECK(o.spec.max_np() == 4);

  // A relative path resolves against the current directory.
  InDirectory in(dir.path());
  o = ParseOk({"-np", "2", "--host-discovery-script", "./discover.sh", "./t"});
  CHECK(o.spec.discovery().script() == script);
  CHECK(o.spec.elastic());
  CHECK(o.spec.min_np() == 2);
  CHECK(o.spec.max_np() == 0);  // no upper limit
}

TEST_CASE("the discovery script must exist and be executable") {
  TempDir dir;
  const std::string missing = (dir.path() / "nope.sh").string();
  RequireError({"-np", "2", "--host-discovery-script", missing, "./t"},
               {"--host-discovery-script", missing, "no such file"});
  const std::string plain = dir.Write("plain.sh", kScript);
  RequireError({"-np", "2", "--host-discovery-script", plain, "./t"},
               {"--host-discovery-script", plain, "not executable"});
  RequireError({"-np", "2", "--host-discovery-script", dir.path().string(), "./t"},
               {"--host-discovery-script", "not a regular file"});
}

TEST_CASE("host sources are mutually exclusive") {
  TempDir dir;
  const std::string script = dir.Write("discover.sh", kScript, /*executable=*/true);
  const std::string hostfile = dir.Write("hosts", "a slots=2\n");
  RequireError({"-np", "2", "--host-discovery-script", script, "-H", "a:2", "./t"},
               {"--host-discovery-script", "-H/--hosts", "cannot be used together"});
  RequireError({"-H", "a:2", "--hostfile", hostfile, "./t"},
               {"-H/--hosts", "--hostfile", "cannot be used together"});
}

TEST_CASE("--min-np / --max-np make the job elastic, with Horovod's defaults") {
  RunOptions o = ParseOk({"--min-np", "2", "./t"});
  CHECK(o.spec.elastic());
  CHECK(o.spec.num_proc() == 2);  // np defaults to min-np
  CHECK(o.spec.min_np() == 2);
  CHECK(o.spec.max_np() == 0);
  CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"localhost", 2}});

  o = ParseOk({"-np", "3", "--max-np", "5", "./t"});
  CHECK(o.spec.elastic());
  CHECK(o.spec.num_proc() == 3);
  CHECK(o.spec.min_np() == 3);  // min-np defaults to np
  CHECK(o.spec.max_np() == 5);

  o = ParseOk({"-np", "2", "--min-np", "2", "--max-np", "8", "-H", "a:4,b:4", "./t"});
  CHECK(o.spec.elastic());
  CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"a", 4}, {"b", 4}});

  RequireError({"--max-np", "4", "./t"}, {"-np/--num-proc", "--min-np"});
}

TEST_CASE("job sizes that contradict each other are rejected") {
  RequireError({"--min-np", "4", "--max-np", "2", "./t"}, {"--min-np 4", "--max-np 2", "greater"});
  RequireError({"-np", "5", "--min-np", "1", "--max-np", "4", "./t"},
               {"-np/--num-proc 5", "outside"});
  RequireError({"-np", "1", "--min-np", "2", "./t"}, {"-np/--num-proc 1", "outside"});
  RequireError({"-np", "0", "./t"}, {"-np/--num-proc", "0"});
  RequireError({"--min-np", "0", "./t"}, {"--min-np", "0"});
  RequireError({"-np", "2", "--max-np", "-1", "./t"}, {"--max-np", "-1"});
  RequireError({"--min-np", "3", "-H", "a:1,b:1", "./t"}, {"--min-np 3", "2 slots"});
}

TEST_CASE("numbers that are not numbers are rejected with flag and value") {
  RequireError({"-np", "two", "./t"}, {"-np/--num-proc", "'two'", "not a whole number"});
  RequireError({"-np", "2", "--min-np", "1.5", "./t"}, {"--min-np", "'1.5'"});
  RequireError({"-np", "1", "--reset-limit", "-3", "./t"}, {"--reset-limit", "-3"});
  RequireError({"-np", "1", "--slots-per-host", "0", "-H", "a", "./t"}, {"--slots-per-host", "0"});
  RequireError({"-np", "1", "--slots-per-host", "99999", "./t"}, {"--slots-per-host", "99999"});
  RequireError({"-np", "1", "--elastic-timeout", "soon", "./t"},
               {"--elastic-timeout", "'soon'", "not a number of seconds"});
  RequireError({"-np", "1", "--start-timeout", "inf", "./t"}, {"--start-timeout", "inf"});
}

TEST_CASE("timeouts must be positive") {
  for (const char* flag : {"--elastic-timeout", "--start-timeout", "--discovery-interval",
                           "--discovery-timeout", "--liveness-timeout"}) {
    INFO(flag);
    RequireError({"-np", "1", flag, "-5", "./t"}, {flag, "-5"});
    RequireError({"-np", "1", flag, "0", "./t"}, {flag, "0"});
  }
  RunOptions o = ParseOk({"-np", "1", "--elastic-timeout", "60", "--start-timeout", "2.5",
                          "--discovery-interval", "0.5", "--discovery-timeout", "3",
                          "--liveness-timeout", "7", "--reset-limit", "4", "./t"});
  CHECK(o.spec.elastic_timeout_seconds() == 60);
  CHECK(o.spec.start_timeout_seconds() == 2.5);
  CHECK(o.spec.discovery().interval_seconds() == 0.5);
  CHECK(o.spec.discovery().script_timeout_seconds() == 3);
  CHECK(o.spec.liveness_timeout_seconds() == 7);
  CHECK(o.spec.reset_limit() == 4);
}

TEST_CASE("--hot-spares takes a count of 0 or more, 0 by default") {
  CHECK(ParseOk({"-np", "1", "./t"}).spec.hot_spares() == 0);
  CHECK(ParseOk({"-np", "2", "--min-np", "1", "--hot-spares", "3", "./t"}).spec.hot_spares() == 3);
  RequireError({"-np", "1", "--hot-spares", "-1", "./t"}, {"--hot-spares", "-1"});
}

TEST_CASE("--blacklist-cooldown-range takes LO HI with LO <= HI") {
  RunOptions o = ParseOk({"-np", "1", "--blacklist-cooldown-range", "5", "60", "./t"});
  CHECK(o.spec.blacklist_cooldown_min_seconds() == 5);
  CHECK(o.spec.blacklist_cooldown_max_seconds() == 60);
  CHECK(Argv(o.spec) == std::vector<std::string>{"./t"});

  RequireError({"-np", "1", "--blacklist-cooldown-range", "20", "5", "./t"},
               {"--blacklist-cooldown-range", "20", "5"});
  RequireError({"-np", "1", "--blacklist-cooldown-range", "-1", "5", "./t"},
               {"--blacklist-cooldown-range", "-1"});
  RequireError({"-np", "1", "--blacklist-cooldown-range", "5"},
               {"--blacklist-cooldown-range", "needs 2 values"});
}

TEST_CASE("unknown flags, missing values and a missing command are errors") {
  RequireError({"-np", "2", "--bogus", "./t"}, {"unknown flag '--bogus'"});
  RequireError({"-x", "./t"}, {"unknown flag '-x'"});
  RequireError({"-np", "2", "--min-nproc=3", "./t"}, {"unknown flag '--min-nproc=3'"});
  RequireError({"-np"}, {"-np/--num-proc needs a value"});
  RequireError({"-np", "2", "--hosts"}, {"--hosts needs a value"});
  RequireError({"-np", "2"}, {"no command"});
  RequireError({"-np", "2", "--"}, {"no command"});
  RequireError({}, {"no command"});
}

TEST_CASE("--env adds validated variables for the workers") {
  RunOptions o = ParseOk(
      {"-np", "1", "--env", "A=1", "--env", "_B2=x=y", "--env", "EMPTY=", "--env", "A=2", "./t"});
  CHECK(o.spec.env().size() == 3);
  CHECK(o.spec.env().at("A") == "2");
  CHECK(o.spec.env().at("_B2") == "x=y");
  CHECK(o.spec.env().at("EMPTY").empty());

  RequireError({"-np", "1", "--env", "1BAD=2", "./t"}, {"--env", "'1BAD'"});
  RequireError({"-np", "1", "--env", "BAD-NAME=2", "./t"}, {"--env", "'BAD-NAME'"});
  RequireError({"-np", "1", "--env", "NOVALUE", "./t"}, {"--env", "'NOVALUE'", "NAME=VALUE"});
}

TEST_CASE("launcher settings: log level, verbose, detach, daemon") {
  RunOptions o = ParseOk({"-np", "1", "--log-level", "DEBUG", "--verbose", "--detach", "--daemon",
                          "127.0.0.1:7070", "./t"});
  CHECK(o.log_level == "debug");
  CHECK(o.verbose);
  CHECK(o.detach);
  CHECK(o.daemon_address == "127.0.0.1:7070");
  RequireError({"-np", "1", "--log-level", "loud", "./t"}, {"--log-level", "'loud'"});
  RequireError({"-np", "1", "--daemon", "", "./t"}, {"--daemon", "empty"});
  RequireError({"-np", "1", "--verbose=maybe", "./t"}, {"--verbose", "'maybe'"});
}

TEST_CASE("--cwd is stored absolute and must be a directory") {
  TempDir dir;
  fs::create_directory(dir.path() / "work");
  CHECK(ParseOk({"-np", "1", "--cwd", dir.path().string(), "./t"}).spec.working_dir() ==
        dir.path().string());
  InDirectory in(dir.path());
  CHECK(ParseOk({"-np", "1", "--cwd", "work", "./t"}).spec.working_dir() ==
        (dir.path() / "work").string());
  RequireError({"-np", "1", "--cwd", "missing", "./t"}, {"--cwd", "missing", "no such directory"});
}

TEST_CASE("--help describes every flag, its default and an elastic example") {
  for (const char* flag : {"--help", "-h"}) {
    ParseOutcome outcome = Parse({flag});
    REQUIRE(outcome.kind == Kind::kHelp);
    const std::string& help = outcome.text;
    for (const char* name : {"-np,--num-proc",
                             "--min-np",
                             "--max-np",
                             "--host-discovery-script",
                             "--slots-per-host",
                             "--slots",
                             "-H,--hosts",
                             "--hostfile",
                             "--reset-limit",
                             "--elastic-timeout",
                             "--start-timeout",
                             "--blacklist-cooldown-range",
                             "--discovery-interval",
                             "--discovery-timeout",
                             "--liveness-timeout",
                             "--verbose",
                             "--log-level",
                             "--config-file",
                             "--daemon",
                             "--detach",
                             "--cwd",
                             "--env",
                             "--ssh-port",
                             "--ssh-user",
                             "--ssh-identity-file",
                             "--ssh-known-hosts",
                             "--ssh-host-key-checking",
                             "--network-interface"}) {
      CHECK_THAT(help, Catch::Contains(name));
    }
    for (const char* default_text : {"Default: 600", "Default: 30", "Default: none = for good",
                                     "Default: 1.", "Default: 10.", "declared lost. Default: 10.",
                                     "Default: warning", "Default: 22.", "Default: accept-new."}) {
      CHECK_THAT(help, Catch::Contains(default_text));
    }
    CHECK_THAT(help, Catch::Contains("horovodrun -np 4 --min-np 2 --max-np 8"));
  }
  // Asking for help wins over other mistakes on the same line.
  CHECK(Parse({"--bogus", "--help"}).kind == Kind::kHelp);
}

TEST_CASE("--config-file holds every setting under its snake_case flag name") {
  TempDir dir;
  const std::string script = dir.Write("discover.sh", kScript, /*executable=*/true);
  fs::create_directory(dir.path() / "work");
  const std::string config = dir.Write("job.yaml", R"(
num_proc: 3
min_np: 2
max_np: 6
host_discovery_script: discover.sh   # relative to this file
slots_per_host: 2
reset_limit: 5
hot_spares: 2
elastic_timeout: 120
start_timeout: 15
blacklist_cooldown_range: [4, 40]
discovery_interval: 0.5
discovery_timeout: 2
liveness_timeout: 9
verbose: true
log_level: info
daemon: 127.0.0.1:7000
cwd: work
env:
  OMP_NUM_THREADS: 4
  MODE: fast
)");
  RunOptions o = ParseOk({"--config-file", config, "python", "train.py"});
  const v1::JobSpec& s = o.spec;
  CHECK(Argv(s) == std::vector<std::string>{"python", "train.py"});
  CHECK(s.elastic());
  CHECK(s.num_proc() == 3);
  CHECK(s.min_np() == 2);
  CHECK(s.max_np() == 6);
  CHECK(s.discovery().script() == script);
  CHECK(s.discovery().default_slots() == 2);
  CHECK(s.reset_limit() == 5);
  CHECK(s.hot_spares() == 2);
  CHECK(s.elastic_timeout_seconds() == 120);
  CHECK(s.start_timeout_seconds() == 15);
  CHECK(s.blacklist_cooldown_min_seconds() == 4);
  CHECK(s.blacklist_cooldown_max_seconds() == 40);
  CHECK(s.discovery().interval_seconds() == 0.5);
  CHECK(s.discovery().script_timeout_seconds() == 2);
  CHECK(s.liveness_timeout_seconds() == 9);
  CHECK(s.working_dir() == (dir.path() / "work").string());
  CHECK(s.env().at("OMP_NUM_THREADS") == "4");
  CHECK(s.env().at("MODE") == "fast");
  CHECK(o.verbose);
  CHECK(o.log_level == "info");
  CHECK(o.daemon_address == "127.0.0.1:7000");
}

TEST_CASE("flags on the command line override the config file") {
  TempDir dir;
  const std::string script = dir.Write("discover.sh", kScript, /*executable=*/true);
  const std::string config = dir.Write("job.yaml", R"(
num_proc: 2
hosts: [a:2, b:2]
elastic_timeout: 120
env: {A: from_file, B: from_file}
)");
  RunOptions o = ParseOk({"--config-file", config, "./t"});
  CHECK(o.spec.num_proc() == 2);
  CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"a", 2}, {"b", 2}});

  o = ParseOk({"--config-file", config, "-np", "4", "--elastic-timeout", "30", "--env",
               "B=from_flag", "./t"});
  CHECK(o.spec.num_proc() == 4);
  CHECK(o.spec.elastic_timeout_seconds() == 30);
  CHECK(o.spec.env().at("A") == "from_file");  // env merges by name
  CHECK(o.spec.env().at("B") == "from_flag");

  // A host source on the command line replaces the file's instead of conflicting with it.
  o = ParseOk({"--config-file", config, "--host-discovery-script", script, "./t"});
  CHECK(o.spec.discovery().script() == script);
  CHECK(o.spec.discovery().hosts().empty());
  CHECK(o.spec.elastic());
}

TEST_CASE("config file mistakes name the file, the line and the key") {
  TempDir dir;
  const std::string unknown = dir.Write("unknown.yaml", "num_proc: 2\nmin_nproc: 1\n");
  RequireError({"--config-file", unknown, "./t"}, {unknown + ":2", "unknown key 'min_nproc'"});

  const std::string malformed = dir.Write("malformed.yaml", "num_proc: 2\nenv: {A: 1\n");
  RequireError({"--config-file", malformed, "./t"}, {malformed + ":", "malformed YAML"});

  const std::string bad_number = dir.Write("number.yaml", "\nnum_proc: many\n");
  RequireError({"--config-file", bad_number, "./t"},
               {bad_number + ":2", "num_proc", "'many'", "not a whole number"});

  const std::string bad_range = dir.Write("range.yaml", "blacklist_cooldown_range: 5\n");
  RequireError({"--config-file", bad_range, "-np", "1", "./t"},
               {bad_range + ":1", "blacklist_cooldown_range"});

  const std::string bad_env = dir.Write("env.yaml", "env:\n  GOOD: 1\n  9BAD: 2\n");
  // Named with the file's line even when the command line adds variables of its own.
  RequireError({"--config-file", bad_env, "-np", "1", "--env", "OK=1", "./t"},
               {bad_env + ":1: env", "'9BAD'"});

  const std::string empty_value = dir.Write("empty.yaml", "min_np:\n");
  RequireError({"--config-file", empty_value, "./t"}, {empty_value + ":1", "min_np", "no value"});

  const std::string duplicate = dir.Write("dup.yaml", "num_proc: 1\nnum_proc: 2\n");
  RequireError({"--config-file", duplicate, "./t"}, {duplicate + ":2", "duplicate key 'num_proc'"});

  const std::string not_a_map = dir.Write("list.yaml", "- num_proc\n");
  RequireError({"--config-file", not_a_map, "./t"}, {not_a_map, "top level"});

  const std::string both = dir.Write("both.yaml", "hosts: a:1\nhostfile: hosts.txt\n");
  RequireError({"--config-file", both, "./t"}, {both + ":1: hosts", both + ":2: hostfile"});

  RequireError({"--config-file", dir.path().string(), "./t"}, {"--config-file", "is a directory"});

  const std::string missing = (dir.path() / "absent.yaml").string();
  RequireError({"--config-file", missing, "./t"}, {"--config-file", missing, "cannot read"});
}

TEST_CASE("an empty config file changes nothing") {
  TempDir dir;
  RunOptions o = ParseOk({"--config-file", dir.Write("empty.yaml", ""), "-np", "2", "./t"});
  CHECK(o.spec.num_proc() == 2);
  CHECK(o.spec.elastic_timeout_seconds() == 600);
}

}  // namespace
}  // namespace horovodd::cli
