// Horovod 0.28's horovodrun command line, flag by flag: each alias and each form parses into
// the JobSpec (or the option) with Horovod's meaning, the tunables into the HOROVOD_*
// variables Horovod's launcher gives its workers, and Horovod's YAML config file too.
#include <functional>
#include <map>

#include "cli/horovodrun/output_files.h"
#include "run_options_test_support.h"

namespace horovodd::cli {
namespace {

using namespace test_support;  // NOLINT: test helpers

using Env = std::map<std::string, std::string>;

Env EnvOf(const v1::JobSpec& spec) { return Env(spec.env().begin(), spec.env().end()); }

// One row: what the user types before the command, and what the parse must give.
struct Row {
  std::vector<std::string> flags;
  std::function<void(const RunOptions&)> check;
};

void CheckRows(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    std::vector<std::string> args = row.flags;
    args.push_back("./train");
    std::string typed;
    for (const std::string& a : row.flags) typed += a + " ";
    INFO("horovodrun " << typed << "./train");
    row.check(ParseOk(args));
  }
}

// The spec's env holds exactly `expected` (nothing else is set by these flags).
std::function<void(const RunOptions&)> EnvIs(Env expected) {
  return [expected](const RunOptions& o) { CHECK(EnvOf(o.spec) == expected); };
}

TEST_CASE("Horovod's aliases and forms of the job and host flags") {
  TempDir dir;
  const std::string key = dir.Write("id_test", "key\n");
  const std::string hostfile = dir.Write("hosts.txt", "a slots=2\nb slots=2\n");
  CheckRows({
      {{"--num-proc", "3"}, [](const RunOptions& o) { CHECK(o.spec.num_proc() == 3); }},
      {{"-np", "3"}, [](const RunOptions& o) { CHECK(o.spec.num_proc() == 3); }},
      {{"-np=3"}, [](const RunOptions& o) { CHECK(o.spec.num_proc() == 3); }},
      {{"--min-np", "2", "-H", "a:2,b:2"},
       [](const RunOptions& o) {
         CHECK(o.spec.elastic());
         CHECK(o.spec.min_np() == 2);
       }},
      {{"--min-num-proc", "2", "-H", "a:2,b:2"},
       [](const RunOptions& o) {
         CHECK(o.spec.elastic());
         CHECK(o.spec.min_np() == 2);
       }},
      {{"-np", "2", "--max-num-proc", "4", "-H", "a:2,b:2"},
       [](const RunOptions& o) { CHECK(o.spec.max_np() == 4); }},
      {{"-np", "2", "--max-np", "4", "-H", "a:2,b:2"},
       [](const RunOptions& o) { CHECK(o.spec.max_np() == 4); }},
      {{"-H", "a,b", "--slots", "3"},
       [](const RunOptions& o) {
         CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"a", 3}, {"b", 3}});
       }},
      {{"-H", "a,b", "--slots-per-host", "3"},
       [](const RunOptions& o) { CHECK(o.spec.num_proc() == 6); }},
      {{"-hostfile", hostfile},
       [](const RunOptions& o) {
         CHECK(Hosts(o.spec) == std::vector<std::pair<std::string, int>>{{"a", 2}, {"b", 2}});
       }},
      {{"--hostfile", hostfile}, [](const RunOptions& o) { CHECK(o.spec.num_proc() == 4); }},
      {{"-np", "1", "-p", "2222"}, [](const RunOptions& o) { CHECK(o.spec.ssh().port() == 2222); }},
      {{"-np", "1", "--ssh-port", "2222"},
       [](const RunOptions& o) { CHECK(o.spec.ssh().port() == 2222); }},
      {{"-np", "1", "-i", key},
       [key](const RunOptions& o) { CHECK(o.spec.ssh().identity_file() == key); }},
      {{"-np", "1", "--ssh-identity-file", key},
       [key](const RunOptions& o) { CHECK(o.spec.ssh().identity_file() == key); }},
      {{"-np", "1", "--start-timeout", "45"},
       [](const RunOptions& o) { CHECK(o.spec.start_timeout_seconds() == 45); }},
  });
}

TEST_CASE("--network-interface(s): repeated, comma-separated, each name once in order") {
  auto interfaces = [](const RunOptions& o) {
    return std::vector<std::string>(o.spec.network_interfaces().begin(),
                                    o.spec.network_interfaces().end());
  };
  using Names = std::vector<std::string>;
  CheckRows({
      {{"-np", "1", "--network-interfaces", "eth0,eth1"},
       [&](const RunOptions& o) {
         CHECK(interfaces(o) == Names{"eth0", "eth1"});
         CHECK(o.spec.network_interface() == "eth0");  // rings bind to the first
       }},
      {{"-np", "1", "--network-interface", "eth1", "--network-interface", "eth0"},
       [&](const RunOptions& o) {
         CHECK(interfaces(o) == Names{"eth1", "eth0"});
         CHECK(o.spec.network_interface() == "eth1");
       }},
      {{"-np", "1", "--network-interface", "ib0,eth0", "--network-interfaces", "eth0,eth2"},
       [&](const RunOptions& o) {
         CHECK(interfaces(o) == Names{"ib0", "eth0", "eth2"});
       }},
      {{"-np", "1", "--network-interfaces=lo"},
       [&](const RunOptions& o) { CHECK(interfaces(o) == Names{"lo"}); }},
  });
  RequireError({"-np", "1", "--network-interfaces", "eth0,,eth1", "./t"},
               {"--network-interface", "''"});
}

TEST_CASE("each tunable becomes the HOROVOD_* variable Horovod sets, in Horovod's units") {
  CheckRows({
      {{"-np", "1", "--fusion-threshold-mb", "32"},
       EnvIs({{"HOROVOD_FUSION_THRESHOLD", "33554432"}})},
      {{"-np", "1", "--fusion-threshold-mb", "0"}, EnvIs({{"HOROVOD_FUSION_THRESHOLD", "0"}})},
      {{"-np", "1", "--cycle-time-ms", "2.5"}, EnvIs({{"HOROVOD_CYCLE_TIME", "2.5"}})},
      {{"-np", "1", "--cache-capacity", "2048"}, EnvIs({{"HOROVOD_CACHE_CAPACITY", "2048"}})},
      {{"-np", "1", "--hierarchical-allreduce"}, EnvIs({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}})},
      {{"-np", "1", "--no-hierarchical-allreduce"},
       EnvIs({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}})},
      {{"-np", "1", "--hierarchical-allgather"}, EnvIs({{"HOROVOD_HIERARCHICAL_ALLGATHER", "1"}})},
      {{"-np", "1", "--no-hierarchical-allgather"},
       EnvIs({{"HOROVOD_HIERARCHICAL_ALLGATHER", "0"}})},
      {{"-np", "1", "--autotune"}, EnvIs({{"HOROVOD_AUTOTUNE", "1"}})},
      {{"-np", "1", "--no-autotune"}, EnvIs({})},
      {{"-np", "1", "--autotune", "--autotune-log-file", "/tmp/at.csv", "--autotune-warmup-samples",
        "5", "--autotune-steps-per-sample", "7", "--autotune-bayes-opt-max-samples", "9",
        "--autotune-gaussian-process-noise", "0.5"},
       EnvIs({{"HOROVOD_AUTOTUNE", "1"},
              {"HOROVOD_AUTOTUNE_LOG", "/tmp/at.csv"},
              {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
              {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "7"},
              {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "9"},
              {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"}})},
      // Without --autotune Horovod passes none of its options.
      {{"-np", "1", "--autotune-warmup-samples", "5"}, EnvIs({})},
      {{"-np", "1", "--timeline-filename", "/tmp/tl.json"},
       EnvIs({{"HOROVOD_TIMELINE", "/tmp/tl.json"}})},
      {{"-np", "1", "--timeline-filename", "/tmp/tl.json", "--timeline-mark-cycles"},
       EnvIs({{"HOROVOD_TIMELINE", "/tmp/tl.json"}, {"HOROVOD_TIMELINE_MARK_CYCLES", "1"}})},
      {{"-np", "1", "--timeline-mark-cycles"}, EnvIs({})},  // needs a timeline file
      {{"-np", "1", "--no-stall-check"}, EnvIs({{"HOROVOD_STALL_CHECK_DISABLE", "1"}})},
      {{"-np", "1", "--stall-check"}, EnvIs({{"HOROVOD_STALL_CHECK_DISABLE", "0"}})},
      {{"-np", "1", "--stall-check-warning-time-seconds", "20"},
       EnvIs({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "20"}})},
      {{"-np", "1", "--stall-check-shutdown-time-seconds", "90"},
       EnvIs({{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"}})},
      {{"-np", "1", "--mpi-threads-disable"}, EnvIs({{"HOROVOD_MPI_THREADS_DISABLE", "1"}})},
      {{"-np", "1", "--no-mpi-threads-disable"}, EnvIs({{"HOROVOD_MPI_THREADS_DISABLE", "0"}})},
      {{"-np", "1", "--mpi-args=--map-by ppr:6:node"}, EnvIs({})},
      {{"-np", "1", "--binding-args=--rankfile f"}, EnvIs({})},
      {{"-np", "1", "--tcp"}, EnvIs({{"NCCL_IB_DISABLE", "1"}})},
      {{"-np", "1", "--num-nccl-streams", "2"}, EnvIs({{"HOROVOD_NUM_NCCL_STREAMS", "2"}})},
      {{"-np", "1", "--thread-affinity", "3"}, EnvIs({{"HOROVOD_THREAD_AFFINITY", "3"}})},
      {{"-np", "1", "--gloo-timeout-seconds", "120"},
       EnvIs({{"HOROVOD_GLOO_TIMEOUT_SECONDS", "120"}})},
      {{"-np", "1", "--log-level", "DEBUG"}, EnvIs({{"HOROVOD_LOG_LEVEL", "DEBUG"}})},
      {{"-np", "1", "--log-level", "fatal"}, EnvIs({{"HOROVOD_LOG_LEVEL", "FATAL"}})},
      {{"-np", "1", "--log-without-timestamp"}, EnvIs({{"HOROVOD_LOG_HIDE_TIME", "1"}})},
      {{"-np", "1", "--log-with-timestamp"}, EnvIs({{"HOROVOD_LOG_HIDE_TIME", "0"}})},
      {{"-np", "1", "--log-hide-timestamp"}, EnvIs({{"HOROVOD_LOG_HIDE_TIME", "1"}})},
  });
}

TEST_CASE("flags with no variable: output, timestamps, controller, cache") {
  TempDir dir;
  CheckRows({
      {{"-np", "2", "--output-filename", (dir.path() / "out").string()},
       [&](const RunOptions& o) {
         CHECK(o.output_filename == (dir.path() / "out").string());
         CHECK(EnvOf(o.spec).empty());
       }},
      {{"-np", "2", "--prefix-output-with-timestamp"},
       [](const RunOptions& o) { CHECK(o.prefix_output_with_timestamp); }},
      {{"-np", "2", "-prefix-timestamp"},
       [](const RunOptions& o) { CHECK(o.prefix_output_with_timestamp); }},
      {{"-np", "2", "--gloo"}, [](const RunOptions& o) { CHECK(o.warnings.empty()); }},
      {{"-np", "2", "--disable-cache"}, [](const RunOptions& o) { CHECK(o.warnings.empty()); }},
      {{"-np", "2", "--verbose"}, [](const RunOptions& o) { CHECK(o.verbose); }},
  });
  // Relative to where horovodrun runs, as Horovod's.
  InDirectory in(dir.path());
  CHECK(ParseOk({"-np", "1", "--output-filename", "logs", "./t"}).output_filename ==
        (dir.path() / "logs").string());
}

TEST_CASE("HOROVOD_START_TIMEOUT and HOROVOD_ELASTIC_TIMEOUT are the defaults, as in Horovod") {
  setenv("HOROVOD_START_TIMEOUT", "45", 1);
  setenv("HOROVOD_ELASTIC_TIMEOUT", "120", 1);
  RunOptions o = ParseOk({"-np", "1", "./t"});
  CHECK(o.spec.start_timeout_seconds() == 45);
  CHECK(o.spec.elastic_timeout_seconds() == 120);
  CHECK(ParseOk({"-np", "1", "--start-timeout", "5", "./t"}).spec.start_timeout_seconds() == 5);
  setenv("HOROVOD_START_TIMEOUT", "soon", 1);
  RequireError({"-np", "1", "./t"}, {"HOROVOD_START_TIMEOUT", "'soon'"});
  unsetenv("HOROVOD_START_TIMEOUT");
  unsetenv("HOROVOD_ELASTIC_TIMEOUT");
}

TEST_CASE("a flag's variable wins over the same one given with --env") {
  RunOptions o = ParseOk({"-np", "1", "--env", "HOROVOD_CYCLE_TIME=9", "--env", "OTHER=1",
                          "--cycle-time-ms", "3", "./t"});
  CHECK(EnvOf(o.spec) == Env{{"HOROVOD_CYCLE_TIME", "3"}, {"OTHER", "1"}});
}

TEST_CASE("tunables nothing here acts on are accepted with one warning each") {
  auto warnings = [](std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"-np", "1"});
    flags.push_back("./t");
    return ParseOk(flags).warnings;
  };
  // Acted on (by the engine, the shared-memory transport, NCCL): no warning.
  CHECK(warnings({"--fusion-threshold-mb", "8", "--cycle-time-ms", "2", "--hierarchical-allreduce",
                  "--timeline-filename", "t.json", "--timeline-mark-cycles", "--no-stall-check",
                  "--stall-check-warning-time-seconds", "5", "--stall-check-shutdown-time-seconds",
                  "9", "--gloo-timeout-seconds", "60", "--tcp", "--no-hierarchical-allgather",
                  "--log-with-timestamp"})
            .empty());
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--cache-capacity", "1"},
                                                        {"--hierarchical-allgather", ""},
                                                        {"--autotune", ""},
                                                        {"--num-nccl-streams", "2"},
                                                        {"--thread-affinity", "1"},
                                                        {"--log-without-timestamp", ""}}) {
    std::vector<std::string> flags = {flag};
    if (!value.empty()) flags.push_back(value);
    const std::vector<std::string> got = warnings(flags);
    INFO(flag);
    REQUIRE(got.size() == 1);
    CHECK_THAT(got[0], Catch::Contains(flag) && Catch::Contains("does not act on it yet"));
    CHECK(got[0].find('\n') == std::string::npos);
  }
  // The autotune options are covered by --autotune's line.
  CHECK(warnings({"--autotune", "--autotune-warmup-samples", "4"}).size() == 1);
  for (const std::string& flag : {"--mpi-threads-disable", "--mpi-args=-x", "--binding-args=-y"}) {
    const std::vector<std::string> got = warnings({flag});
    INFO(flag);
    REQUIRE(got.size() == 1);
    CHECK_THAT(got[0], Catch::Contains("no effect") && Catch::Contains("MPI"));
  }
  const std::vector<std::string> got = warnings({"--autotune-log-file", "x.csv"});
  REQUIRE(got.size() == 1);
  CHECK_THAT(got[0], Catch::Contains("--autotune-log-file") && Catch::Contains("--autotune"));
}

TEST_CASE("tunable values are checked as Horovod checks them") {
  RequireError({"-np", "1", "--fusion-threshold-mb", "-1", "./t"},
               {"--fusion-threshold-mb", "less than 0"});
  RequireError({"-np", "1", "--fusion-threshold-mb", "1.5", "./t"},
               {"--fusion-threshold-mb", "'1.5'", "whole number"});
  RequireError({"-np", "1", "--cycle-time-ms", "fast", "./t"}, {"--cycle-time-ms", "'fast'"});
  RequireError({"-np", "1", "--cycle-time-ms", "0", "./t"}, {"--cycle-time-ms", "more than 0"});
  RequireError({"-np", "1", "--autotune", "--autotune-gaussian-process-noise", "1.5", "./t"},
               {"--autotune-gaussian-process-noise", "[0, 1]"});
  RequireError({"-np", "1", "--gloo-timeout-seconds", "0", "./t"},
               {"--gloo-timeout-seconds", "less than 1"});
  RequireError({"-np", "1", "--log-level", "loud", "./t"}, {"--log-level", "'loud'", "fatal"});
  RequireError({"-np", "1", "--hierarchical-allreduce", "--no-hierarchical-allreduce", "./t"},
               {"--hierarchical-allreduce", "--no-hierarchical-allreduce", "together"});
  RequireError({"-np", "1", "--timeline-filename", "", "./t"}, {"--timeline-filename", "empty"});
}

TEST_CASE("--mpi and --jsrun are refused with what to use instead; --gloo is fine") {
  RequireError({"-np", "2", "--mpi", "./t"}, {"--mpi", "Gloo", "--gloo"});
  RequireError({"-np", "2", "--jsrun", "./t"}, {"--jsrun", "Gloo", "--gloo"});
  CHECK(ParseOk({"-np", "2", "--gloo", "./t"}).spec.num_proc() == 2);
}

TEST_CASE("-v/--version and -cb/--check-build need no -np and no command") {
  for (const std::string& flag : {"-v", "--version"}) {
    INFO(flag);
    CHECK(Parse({flag}).kind == Kind::kVersion);
    CHECK(Parse({"-np", "2", flag, "./t"}).kind == Kind::kVersion);
  }
  for (const std::string& flag : {"-cb", "--check-build"}) {
    INFO(flag);
    CHECK(Parse({flag}).kind == Kind::kCheckBuild);
    CHECK(Parse({"--verbose", flag}).kind == Kind::kCheckBuild);
  }
  CHECK(Parse({"--help"}).kind == Kind::kHelp);
}

TEST_CASE("Horovod's YAML config sections become the same settings as the flags") {
  TempDir dir;
  const std::string config = dir.Write("horovod.yaml", R"(
controller: gloo
params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true
  hierarchical_allgather: false
autotune:
  enabled: true
  log_file: /tmp/autotune.csv
  warmup_samples: 3
  steps_per_sample: 10
  bayes_opt_max_samples: 20
  gaussian_process_noise: 0.8
timeline:
  filename: /tmp/timeline.json
  mark_cycles: true
stall_check:
  enabled: false
  warning_time_seconds: 60
  shutdown_time_seconds: 120
library_options:
  mpi_threads_disable: false
  num_nccl_streams: 2
  thread_affinity: 1
  gloo_timeout_seconds: 45
logging:
  level: INFO
  with_timestamp: false
)");
  RunOptions o = ParseOk({"-np", "2", "--config-file", config, "./t"});
  CHECK(EnvOf(o.spec) == Env{
                             {"HOROVOD_FUSION_THRESHOLD", "33554432"},
                             {"HOROVOD_CYCLE_TIME", "10"},
                             {"HOROVOD_CACHE_CAPACITY", "2048"},
                             {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                             {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
                             {"HOROVOD_AUTOTUNE", "1"},
                             {"HOROVOD_AUTOTUNE_LOG", "/tmp/autotune.csv"},
                             {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "3"},
                             {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "10"},
                             {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "20"},
                             {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8"},
                             {"HOROVOD_TIMELINE", "/tmp/timeline.json"},
                             {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
                             {"HOROVOD_STALL_CHECK_DISABLE", "1"},
                             {"HOROVOD_STALL_CHECK_TIME_SECONDS", "60"},
                             {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "120"},
                             {"HOROVOD_MPI_THREADS_DISABLE", "0"},
                             {"HOROVOD_NUM_NCCL_STREAMS", "2"},
                             {"HOROVOD_THREAD_AFFINITY", "1"},
                             {"HOROVOD_GLOO_TIMEOUT_SECONDS", "45"},
                             {"HOROVOD_LOG_LEVEL", "INFO"},
                             {"HOROVOD_LOG_HIDE_TIME", "1"},
                         });
  CHECK(o.log_level == "info");
  // The warnings name the file, the line and the key.
  bool named = false;
  for (const std::string& w : o.warnings) {
    named = named || w.find(config + ":6: params.cache_capacity") != std::string::npos;
  }
  CHECK(named);

  // Flags override the file, as Horovod's flags override its config.
  o = ParseOk({"-np", "2", "--config-file", config, "--fusion-threshold-mb", "1",
               "--no-hierarchical-allreduce", "--stall-check", "--log-level", "error",
               "--no-autotune", "./t"});
  const Env env = EnvOf(o.spec);
  CHECK(env.at("HOROVOD_FUSION_THRESHOLD") == "1048576");
  CHECK(env.at("HOROVOD_HIERARCHICAL_ALLREDUCE") == "0");
  CHECK(env.at("HOROVOD_STALL_CHECK_DISABLE") == "0");
  CHECK(env.at("HOROVOD_LOG_LEVEL") == "ERROR");
  CHECK(env.count("HOROVOD_AUTOTUNE") == 0);
  CHECK(env.count("HOROVOD_AUTOTUNE_LOG") == 0);
  CHECK(env.at("HOROVOD_CYCLE_TIME") == "10");  // not overridden: the file's
}

TEST_CASE("Horovod's config file and ours mix; autotune may be a flat key") {
  TempDir dir;
  const std::string config = dir.Write("mixed.yaml", R"(
num_proc: 3
network_interfaces: [eth0, eth1]
autotune: true
stall_check:
  enabled: true
)");
  RunOptions o = ParseOk({"--config-file", config, "./t"});
  CHECK(o.spec.num_proc() == 3);
  CHECK(o.spec.network_interface() == "eth0");
  CHECK(o.spec.network_interfaces_size() == 2);
  CHECK(EnvOf(o.spec) == Env{{"HOROVOD_AUTOTUNE", "1"}, {"HOROVOD_STALL_CHECK_DISABLE", "0"}});
}

TEST_CASE("Horovod config mistakes name the file, the line and the key") {
  TempDir dir;
  const std::string unknown = dir.Write("u.yaml", "params:\n  fusion_threshold: 32\n");
  RequireError({"--config-file", unknown, "-np", "1", "./t"},
               {unknown + ":2", "unknown key 'params.fusion_threshold'", "fusion_threshold_mb"});
  const std::string section = dir.Write("s.yaml", "timeline: /tmp/x.json\n");
  RequireError({"--config-file", section, "-np", "1", "./t"}, {section + ":1", "timeline", "map"});
  const std::string bad = dir.Write("b.yaml", "stall_check:\n  enabled: maybe\n");
  RequireError({"--config-file", bad, "-np", "1", "./t"},
               {bad + ":2: stall_check.enabled", "'maybe'"});
  const std::string value = dir.Write("v.yaml", "params:\n  cache_capacity: lots\n");
  RequireError({"--config-file", value, "-np", "1", "./t"},
               {value + ":2: params.cache_capacity", "'lots'"});
  const std::string twice = dir.Write("t.yaml", "cycle_time_ms: 2\nparams:\n  cycle_time_ms: 3\n");
  RequireError({"--config-file", twice, "-np", "1", "./t"},
               {twice + ":3", "duplicate key 'params.cycle_time_ms'", twice + ":1: cycle_time_ms"});
  const std::string mpi = dir.Write("m.yaml", "controller: mpi\n");
  RequireError({"--config-file", mpi, "-np", "1", "./t"}, {mpi + ":1: controller", "gloo"});
  const std::string other = dir.Write("o.yaml", "controller: ucx\n");
  RequireError({"--config-file", other, "-np", "1", "./t"}, {"no such controller 'ucx'"});
}

TEST_CASE("--output-filename: Horovod's rank.<rank> directories, padded to sort") {
  CHECK(PaddedRank(0, 1) == "0");
  CHECK(PaddedRank(3, 4) == "3");
  CHECK(PaddedRank(3, 12) == "03");
  CHECK(PaddedRank(10, 11) == "10");
  CHECK(PaddedRank(5, 100) == "05");
  CHECK(PaddedRank(5, 101) == "005");

  TempDir dir;
  const fs::path out = dir.path() / "logs" / "run1";
  auto files = RankOutputFiles::Open(out.string(), 12);
  REQUIRE(files.ok());
  CHECK((*files)->Write(3, "stdout", "[3]<stdout>:one").ok());
  CHECK((*files)->Write(3, "stdout", "[3]<stdout>:two").ok());
  CHECK((*files)->Write(3, "stderr", "[3]<stderr>:oops").ok());
  CHECK((*files)->Write(-1, "stdout", "no rank yet").ok());  // dropped
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(read(out / "rank.03" / "stdout") == "[3]<stdout>:one\n[3]<stdout>:two\n");
  CHECK(read(out / "rank.03" / "stderr") == "[3]<stderr>:oops\n");
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1);

  const std::string file = dir.Write("not_a_dir", "x");
  CHECK_FALSE(RankOutputFiles::Open(file, 2).ok());
}

}  // namespace
}  // namespace horovodd::cli
