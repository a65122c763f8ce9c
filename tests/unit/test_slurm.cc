// The Slurm pieces that need no Slurm: SLURM_TASKS_PER_NODE and scontrol
// output parsing, the Slurm host source over a scripted scontrol, and
// horovodrun's --launcher / --host-discovery settings. The real cluster is
// tests/integration/test_slurm.py.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "daemon/validation/request_validation.h"
#include "discovery/script_runner.h"
#include "discovery/slurm_host_source.h"
#include "discovery/slurm_parser.h"
#include "job_spec_support.h"
#include "run_options_test_support.h"
#include "scoped_env.h"

namespace horovodd::discovery {
namespace {

std::vector<int> Tasks(const std::string& text) {
  absl::StatusOr<std::vector<int>> counts = ParseTasksPerNode(text);
  INFO(counts.status().ToString());
  REQUIRE(counts.ok());
  return *counts;
}

TEST_CASE("SLURM_TASKS_PER_NODE: counts, repeats and their mix") {
  CHECK(Tasks("4") == std::vector<int>{4});
  CHECK(Tasks("2(x3)") == std::vector<int>{2, 2, 2});
  CHECK(Tasks("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(Tasks("1,3(x2),2") == std::vector<int>{1, 3, 3, 2});
}

TEST_CASE("SLURM_TASKS_PER_NODE: malformed entries are named") {
  for (const char* bad : {"", "x", "2(x)", "2(3)", "2(x0)", "0", "-1", "2(x3", "2,,1", "1(x2)x",
                          "99999", "1(x99999999999)"}) {
    absl::StatusOr<std::vector<int>> counts = ParseTasksPerNode(bad);
    INFO(bad);
    REQUIRE_FALSE(counts.ok());
    CHECK(counts.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(counts.status().message()), Catch::Contains("SLURM_TASKS_PER_NODE"));
  }
}

TEST_CASE("scontrol -o records: values with spaces stay whole") {
  auto fields = ParseScontrolRecord(
      "NodeName=node1 Arch=x86_64 NodeAddr=10.0.0.7 NodeHostName=n1 OS=Linux 6.1.0-18-amd64 #1 "
      "SMP State=IDLE+DRAIN Reason=disk is full [root@2026-12-02T02:00:00]");
  CHECK(fields["NodeName"] == "node1");
  CHECK(fields["NodeAddr"] == "10.0.0.7");
  CHECK(fields["OS"] == "Linux 6.1.0-18-amd64 #1 SMP");
  CHECK(fields["State"] == "IDLE+DRAIN");
  CHECK(fields["Reason"] == "disk is full [root@2026-12-02T02:00:00]");
}

TEST_CASE("scontrol show node: names, addresses and states") {
  absl::StatusOr<std::vector<SlurmNode>> nodes = ParseScontrolNodes(
      "NodeName=node1 NodeAddr=127.0.0.1 State=MIXED Partitions=debug\n"
      "NodeName=node2 NodeAddr=10.1.2.3 State=ALLOCATED+DRAIN Partitions=debug\n");
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 2);
  CHECK((*nodes)[0].name == "node1");
  CHECK((*nodes)[0].address == "127.0.0.1");
  CHECK((*nodes)[1].address == "10.1.2.3");
  CHECK((*nodes)[1].state == "ALLOCATED+DRAIN");

  absl::StatusOr<std::vector<SlurmNode>> broken = ParseScontrolNodes("Arch=x86_64 State=IDLE\n");
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(std::string(broken.status().message()), Catch::Contains("without NodeName"));
}

TEST_CASE("node states: which ones run work") {
  for (const char* usable :
       {"IDLE", "MIXED", "ALLOCATED", "COMPLETING", "IDLE+COMPLETING", "MIXED+RESERVED"}) {
    INFO(usable);
    CHECK(SlurmNodeUsable(usable));
  }
  for (const char* unusable :
       {"DOWN", "IDLE+DRAIN", "MIXED+DRAIN", "DRAINED", "DRAINING", "DOWN+NOT_RESPONDING", "IDLE*",
        "IDLE+POWERED_DOWN", "FUTURE", "MIXED+FAIL", "", "UNKNOWN"}) {
    INFO(unusable);
    CHECK_FALSE(SlurmNodeUsable(unusable));
  }
}

TEST_CASE("scontrol show job: state and node list") {
  absl::StatusOr<SlurmJob> job = ParseScontrolJob(
      "JobId=42 JobName=interactive UserId=root(0) JobState=RUNNING Reason=None "
      "NodeList=node[1-2] BatchHost=node1 NumNodes=2\n");
  REQUIRE(job.ok());
  CHECK(job->state == "RUNNING");
  CHECK(job->node_list == "node[1-2]");
  CHECK_FALSE(ParseScontrolJob("").ok());
  CHECK_FALSE(ParseScontrolJob("JobId=42 NodeList=node1").ok());
}

TEST_CASE("Slurm job ids") {
  CHECK(IsValidSlurmJobId("42"));
  CHECK(IsValidSlurmJobId("1234_7"));
  for (const char* bad : {"", "abc", "12;rm", "-1", "1_2_3", "_1", "1_"}) {
    INFO(bad);
    CHECK_FALSE(IsValidSlurmJobId(bad));
  }
}

// A scontrol that answers from a table; what is not in it fails as scontrol would.
struct FakeSlurm {
  std::string job = "JobId=7 JobState=RUNNING NodeList=node[1-3]";
  std::map<std::string, std::string> states = {
      {"node1", "MIXED"}, {"node2", "MIXED"}, {"node3", "ALLOCATED"}};
  absl::Status failure = absl::OkStatus();
  std::vector<std::string> calls;

  CommandRunner Runner() {
    return [this](const std::vector<std::string>& argv) -> absl::StatusOr<std::string> {
      calls.push_back(absl::StrJoin(argv, " "));
      if (!failure.ok()) return failure;
      const std::string command = absl::StrJoin(argv, " ");
      if (command == "scontrol -o show job 7") return job + "\n";
      if (command == "scontrol show hostnames node[1-3]") return "node1\nnode2\nnode3\n";
      const std::map<std::string, std::vector<std::string>> lists = {
          {"node[1-3]", {"node1", "node2", "node3"}}, {"node[1-2]", {"node1", "node2"}}};
      for (const auto& [list, names] : lists) {
        if (command != "scontrol -o show node " + list) continue;
        std::string out;
        for (const std::string& name : names) {
          out += "NodeName=" + name + " NodeAddr=127.0.0.1 State=" + states[name] + "\n";
        }
        return out;
      }
      return absl::UnavailableError("command '" + command + "': unexpected");
    };
  }
};

HostSet Discover(HostSource& source) {
  absl::StatusOr<HostSet> hosts = source.Discover();
  INFO(hosts.status().ToString());
  REQUIRE(hosts.ok());
  return *hosts;
}

TEST_CASE("Slurm host source: slots from the tasks per node; drained nodes leave and return") {
  FakeSlurm slurm;
  SlurmHostSourceOptions options;
  options.job_id = "7";
  options.node_list = "node[1-3]";
  options.tasks_per_node = "2(x2),1";
  options.run = slurm.Runner();
  auto source = MakeSlurmHostSource(options);
  CHECK(source->Describe() == "Slurm job 7");
  CHECK(FormatHostSet(Discover(*source)) == "node1:2,node2:2,node3:1");

  slurm.states["node2"] = "MIXED+DRAIN";
  CHECK(FormatHostSet(Discover(*source)) == "node1:2,node3:1");
  slurm.states["node3"] = "DOWN+NOT_RESPONDING";
  CHECK(FormatHostSet(Discover(*source)) == "node1:2");
  slurm.states["node2"] = "MIXED";
  slurm.states["node3"] = "IDLE";
  CHECK(FormatHostSet(Discover(*source)) == "node1:2,node2:2,node3:1");
  // The allocation shrank (scontrol update jobid=7 NumNodes=2): node3 is no longer ours.
  slurm.job = "JobId=7 JobState=RUNNING NodeList=node[1-2]";
  CHECK(FormatHostSet(Discover(*source)) == "node1:2,node2:2");
}

TEST_CASE("Slurm host source: --slots-per-host wins; an ended job has no hosts") {
  FakeSlurm slurm;
  SlurmHostSourceOptions options;
  options.job_id = "7";
  options.node_list = "node[1-3]";
  options.tasks_per_node = "2(x2),1";
  options.slots_per_host = 4;
  options.run = slurm.Runner();
  auto source = MakeSlurmHostSource(options);
  CHECK(FormatHostSet(Discover(*source)) == "node1:4,node2:4,node3:4");
  slurm.job = "JobId=7 JobState=COMPLETED NodeList=node[1-3]";
  CHECK(Discover(*source).empty());
}

TEST_CASE("Slurm host source: an unreachable slurmctld is an error, a forgotten job is empty") {
  FakeSlurm slurm;
  SlurmHostSourceOptions options;
  options.job_id = "7";
  options.node_list = "node[1-3]";
  options.run = slurm.Runner();
  auto source = MakeSlurmHostSource(options);
  CHECK(FormatHostSet(Discover(*source)) == "node1:1,node2:1,node3:1");

  slurm.failure = absl::UnavailableError(
      "command 'scontrol -o show job 7': exited with status 1: slurm_load_jobs error: Unable "
      "to contact slurm controller (connect failure)");
  absl::StatusOr<HostSet> down = source->Discover();
  REQUIRE_FALSE(down.ok());
  CHECK_THAT(std::string(down.status().message()), Catch::Contains("Unable to contact"));

  slurm.failure = absl::UnavailableError(
      "command 'scontrol -o show job 7': exited with status 1: slurm_load_jobs error: Invalid "
      "job id specified");
  CHECK(Discover(*source).empty());
}

TEST_CASE("RunCommand: arguments reach the command; a missing one is named") {
  absl::StatusOr<std::string> out = RunCommand({"echo", "a", "b c"}, absl::Seconds(20));
  REQUIRE(out.ok());
  CHECK(*out == "a b c\n");
  absl::StatusOr<std::string> missing =
      RunCommand({"hvdd-no-such-command", "x"}, absl::Seconds(20));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()) ==
        "command 'hvdd-no-such-command x': hvdd-no-such-command is not in PATH");
  absl::StatusOr<std::string> failed =
      RunCommand({"sh", "-c", "echo nope >&2; exit 3"}, absl::Seconds(20));
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(std::string(failed.status().message()), Catch::EndsWith("exited with status 3: nope"));
}

}  // namespace
}  // namespace horovodd::discovery

namespace horovodd::cli {
namespace {

using test_support::ParseOk;
using test_support::RequireError;

using horovodd::testing::ScopedEnv;

TEST_CASE("horovodrun outside an allocation: ssh by default; slurm asks for one") {
  ScopedEnv job("SLURM_JOB_ID", nullptr);
  RunOptions options = ParseOk({"-np", "2", "true"});
  CHECK(options.spec.launcher().empty());
  CHECK_FALSE(options.spec.discovery().slurm());
  CHECK(ParseOk({"--launcher", "local", "-np", "2", "true"}).spec.launcher() == "local");
  RequireError({"--launcher", "slurm", "-np", "2", "true"},
               {"--launcher slurm", "SLURM_JOB_ID is not set", "salloc"});
  RequireError({"--host-discovery", "slurm", "-np", "2", "true"},
               {"--host-discovery slurm", "SLURM_JOB_ID"});
  RequireError({"--launcher", "mpirun", "-np", "2", "true"}, {"--launcher", "mpirun"});
  RequireError({"--host-discovery", "k8s", "-np", "2", "true"}, {"--host-discovery", "k8s"});
}

TEST_CASE("horovodrun inside an allocation: srun steps on the allocation's nodes") {
  ScopedEnv job("SLURM_JOB_ID", "42");
  ScopedEnv nodes("SLURM_JOB_NODELIST", "node[1-2]");
  ScopedEnv tasks("SLURM_TASKS_PER_NODE", "2(x2)");
  RunOptions options = ParseOk({"-np", "4", "true"});
  CHECK(options.spec.launcher() == "slurm");
  CHECK(options.spec.slurm().job_id() == "42");
  CHECK(options.spec.slurm().node_list() == "node[1-2]");
  CHECK(options.spec.slurm().tasks_per_node() == "2(x2)");
  CHECK(options.spec.discovery().slurm());
  CHECK(options.spec.discovery().hosts_size() == 0);
  CHECK(options.spec.discovery().default_slots() == 0);
  CHECK_FALSE(options.spec.elastic());

  RunOptions elastic =
      ParseOk({"-np", "4", "--host-discovery", "slurm", "--slots-per-host", "3", "true"});
  CHECK(elastic.spec.elastic());
  CHECK(elastic.spec.discovery().default_slots() == 3);

  // Hosts given: srun steps on those nodes, no discovery.
  RunOptions fixed = ParseOk({"-H", "node1:2,node2:2", "true"});
  CHECK(fixed.spec.launcher() == "slurm");
  CHECK_FALSE(fixed.spec.discovery().slurm());
  CHECK(fixed.spec.discovery().hosts_size() == 2);

  // -H naming only this machine runs here, as with Horovod.
  RunOptions here = ParseOk({"-H", "localhost:2", "true"});
  CHECK(here.spec.launcher().empty());
  CHECK_FALSE(here.spec.discovery().slurm());

  // The old behaviour on request.
  RunOptions ssh = ParseOk({"--launcher", "ssh", "-np", "2", "true"});
  CHECK(ssh.spec.launcher().empty());
  CHECK_FALSE(ssh.spec.discovery().slurm());
  CHECK(ssh.spec.discovery().hosts(0).host() == "localhost");

  RequireError({"--host-discovery", "slurm", "-H", "a:1", "-np", "1", "true"},
               {"--host-discovery slurm", "-H"});
}

TEST_CASE("horovodrun: a SLURM_TASKS_PER_NODE that cannot be read is an error") {
  ScopedEnv job("SLURM_JOB_ID", "42");
  ScopedEnv tasks("SLURM_TASKS_PER_NODE", "2(x");
  RequireError({"-np", "2", "true"}, {"SLURM_TASKS_PER_NODE", "2(x"});
}

}  // namespace
}  // namespace horovodd::cli

namespace horovodd::daemon {
namespace {

std::string Invalid(const v1::JobSpec& spec) {
  absl::Status status = ValidateJobSpecFields(spec);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("the daemon checks --launcher and the Slurm allocation it names") {
  v1::JobSpec spec = testing::LocalJobSpec({"true"}, 2, 2, 2);
  REQUIRE(ValidateJobSpecFields(spec).ok());

  spec.set_launcher("mpirun");
  CHECK_THAT(Invalid(spec), Catch::Contains("'mpirun' is not one of local, ssh, slurm"));
  spec.set_launcher("local");
  CHECK(ValidateJobSpecFields(spec).ok());

  spec.set_launcher("slurm");
  CHECK_THAT(Invalid(spec), Catch::Contains("slurm.job_id"));
  spec.mutable_slurm()->set_job_id("42; scancel -u root");
  CHECK_THAT(Invalid(spec), Catch::Contains("is not a Slurm job id"));
  spec.mutable_slurm()->set_job_id("42");
  CHECK(ValidateJobSpecFields(spec).ok());

  // Slurm discovery replaces the host list; it cannot come with one.
  spec.mutable_discovery()->set_slurm(true);
  CHECK_THAT(Invalid(spec), Catch::Contains("Slurm host discovery excludes"));
  spec.mutable_discovery()->clear_hosts();
  CHECK(ValidateJobSpecFields(spec).ok());

  // The node address is the launcher's to give, never the user's.
  (*spec.mutable_env())["HOROVODD_NODE_ADDR"] = "10.0.0.1";
  CHECK_THAT(Invalid(spec), Catch::Contains("HOROVODD_NODE_ADDR"));
}

}  // namespace
}  // namespace horovodd::daemon
