// horovodrun's remote-host settings: SSH flags, the network interface, their YAML keys.
#include "run_options_test_support.h"

namespace horovodd::cli {
namespace {

using namespace test_support;  // NOLINT: test helpers

TEST_CASE("remote hosts: SSH settings and the network interface, with OpenSSH's defaults") {
  TempDir dir;
  const std::string key = dir.Write("id_test", "not checked here, only that it is readable\n");
  const std::string known_hosts = dir.Write("known_hosts", "");

  RunOptions o = ParseOk({"-H", "node1:2,node2:2", "./t"});
  const v1::SshSpec& defaults = o.spec.ssh();
  CHECK(defaults.port() == 22);
  CHECK_FALSE(defaults.user().empty());  // the current user
  CHECK(defaults.identity_file().empty());
  CHECK(defaults.known_hosts_file().empty());
  CHECK(defaults.host_key_checking() == "accept-new");
  CHECK(o.spec.network_interface().empty());

  o = ParseOk({"-H", "node1:2", "--ssh-port", "2222", "--ssh-user", "alice", "--ssh-identity-file",
               key, "--ssh-known-hosts", known_hosts, "--ssh-host-key-checking", "STRICT",
               "--network-interface", "eth0", "./t"});
  CHECK(o.spec.ssh().port() == 2222);
  CHECK(o.spec.ssh().user() == "alice");
  CHECK(o.spec.ssh().identity_file() == key);
  CHECK(o.spec.ssh().known_hosts_file() == known_hosts);
  CHECK(o.spec.ssh().host_key_checking() == "strict");
  CHECK(o.spec.network_interface() == "eth0");

  // Relative paths become absolute; accept-new may name a file that does not exist yet.
  InDirectory in(dir.path());
  o = ParseOk({"-np", "1", "--ssh-identity-file", "id_test", "--ssh-known-hosts", "new_hosts",
               "--ssh-host-key-checking", "off", "./t"});
  CHECK(o.spec.ssh().identity_file() == key);
  CHECK(o.spec.ssh().known_hosts_file() == (dir.path() / "new_hosts").string());
  CHECK(o.spec.ssh().host_key_checking() == "off");
}

TEST_CASE("remote host settings that cannot work are rejected with flag and value") {
  TempDir dir;
  RequireError({"-np", "1", "--ssh-port", "0", "./t"}, {"--ssh-port", "0"});
  RequireError({"-np", "1", "--ssh-port", "70000", "./t"}, {"--ssh-port", "70000", "not a port"});
  RequireError({"-np", "1", "--ssh-port", "ssh", "./t"}, {"--ssh-port", "'ssh'"});
  RequireError({"-np", "1", "--ssh-user", "", "./t"}, {"--ssh-user", "empty"});
  const std::string missing = (dir.path() / "no_key").string();
  RequireError({"-np", "1", "--ssh-identity-file", missing, "./t"},
               {"--ssh-identity-file", missing, "no such file"});
  RequireError({"-np", "1", "--ssh-identity-file", dir.path().string(), "./t"},
               {"--ssh-identity-file", "not a regular file"});
  RequireError({"-np", "1", "--ssh-host-key-checking", "ask", "./t"},
               {"--ssh-host-key-checking", "'ask'", "strict, accept-new, off"});
  const std::string absent = (dir.path() / "absent_hosts").string();
  RequireError(
      {"-np", "1", "--ssh-host-key-checking", "strict", "--ssh-known-hosts", absent, "./t"},
      {"--ssh-known-hosts", absent, "no such file", "strict"});
  RequireError({"-np", "1", "--network-interface", "eth0/1", "./t"},
               {"--network-interface", "'eth0/1'"});
  RequireError({"-np", "1", "--network-interface", "a-very-long-interface-name", "./t"},
               {"--network-interface", "not a network interface name"});
}

TEST_CASE("remote host settings in the config file, overridden by flags") {
  TempDir dir;
  const std::string key = dir.Write("id_test", "key\n");
  const std::string config = dir.Write("job.yaml", R"(
hosts: [node1:2, node2:2]
ssh_port: 2200
ssh_user: bob
ssh_identity_file: id_test        # relative to this file
ssh_known_hosts: hosts/known
ssh_host_key_checking: off
network_interface: ib0
)");
  RunOptions o = ParseOk({"--config-file", config, "./t"});
  CHECK(o.spec.ssh().port() == 2200);
  CHECK(o.spec.ssh().user() == "bob");
  CHECK(o.spec.ssh().identity_file() == key);
  CHECK(o.spec.ssh().known_hosts_file() == (dir.path() / "hosts" / "known").string());
  CHECK(o.spec.ssh().host_key_checking() == "off");
  CHECK(o.spec.network_interface() == "ib0");

  o = ParseOk({"--config-file", config, "--ssh-port", "22", "--network-interface", "eth1", "./t"});
  CHECK(o.spec.ssh().port() == 22);
  CHECK(o.spec.ssh().user() == "bob");
  CHECK(o.spec.network_interface() == "eth1");

  const std::string bad = dir.Write("bad.yaml", "ssh_host_key_checking: maybe\n");
  RequireError({"--config-file", bad, "-np", "1", "./t"},
               {bad + ":1: ssh_host_key_checking", "'maybe'"});
}

}  // namespace
}  // namespace horovodd::cli
