// A real etcd cluster for a test: `members` etcd processes (Debian's
// etcd-server) on free loopback ports, with their data in a temp dir. Ready
// once every member serves; each member is killed by its PID (SIGKILL) when
// the cluster goes, and dies with the test process if that dies first.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/etcd_client/etcd_client.h"
#include "temp_dir.h"

namespace hvdd_test {

class EtcdTestCluster {
 public:
  explicit EtcdTestCluster(int members = 3) : dir_("hvdd-etcd") {
    std::vector<std::string> peers;
    for (int i = 0; i < members; ++i) {
      Member& m = members_.emplace_back();
      m.name = absl::StrCat("m", i);
      m.client_port = FreePort();
      m.peer_port = FreePort();
      peers.push_back(absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port));
    }
    initial_cluster_ = absl::StrJoin(peers, ",");
    token_ = absl::StrCat("hvdd-test-", std::random_device()());
    for (size_t i = 0; i < members_.size(); ++i) Start(i);
    // Ready when a linearizable read succeeds on every member: a leader is
    // elected. Generous: with the short raft timings below, elections on a
    // starved 2-core machine (the whole suite beside it) may take several rounds.
    for (size_t i = 0; i < members_.size(); ++i) WaitServing(i, absl::Seconds(90));
  }
  ~EtcdTestCluster() {
    for (size_t i = 0; i < members_.size(); ++i) Kill(i);
  }
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  std::vector<std::string> Endpoints() const {
    std::vector<std::string> endpoints;
    for (const Member& m : members_) endpoints.push_back(Endpoint(m));
    return endpoints;
  }
  // "etcd://127.0.0.1:p1,127.0.0.1:p2,..." as horovodd --store takes it.
  std::string Url() const { return "etcd://" + absl::StrJoin(Endpoints(), ","); }

  std::shared_ptr<horovodd::daemon::EtcdClient> Client(
      absl::Duration timeout = absl::Seconds(3)) const {
    horovodd::daemon::EtcdOptions options;
    options.endpoints = Endpoints();
    options.call_timeout = timeout;
    auto client = horovodd::daemon::EtcdClient::Create(options);
    REQUIRE(client.ok());
    return std::shared_ptr<horovodd::daemon::EtcdClient>(std::move(*client));
  }

  // SIGKILL, then reaped; a no-op for a member already down.
  void Kill(size_t i) {
    Member& m = members_[i];
    if (m.pid <= 0) return;
    kill(m.pid, SIGKILL);
    waitpid(m.pid, nullptr, 0);
    m.pid = -1;
  }
  // Starts a killed member again on its data dir and ports.
  void Restart(size_t i) {
    if (members_[i].pid <= 0) Start(i);
  }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };

  static std::string Endpoint(const Member& m) { return absl::StrCat("127.0.0.1:", m.client_port); }

  // A port the kernel had free just now (etcd binds it a moment later).
  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t length = sizeof(addr);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0);
    close(fd);
    return ntohs(addr.sin_port);
  }

  void Start(size_t i) {
    Member& m = members_[i];
    const std::string data = (dir_.path() / m.name).string();
    const std::string log = (dir_.path() / (m.name + ".log")).string();
    const std::string client = absl::StrCat("http://", Endpoint(m));
    const std::string peer = absl::StrCat("http://127.0.0.1:", m.peer_port);
    std::vector<std::string> args = {
        "etcd", "--name", m.name, "--data-dir", data, "--listen-client-urls", client,
        "--advertise-client-urls", client, "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer, "--initial-cluster", initial_cluster_,
        "--initial-cluster-state", "new", "--initial-cluster-token", token_,
        // Quick elections: a test waits on them.
        "--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap",
        "--log-outputs", log};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      execvp("etcd", argv.data());
      _exit(127);
    }
    m.pid = pid;
  }

  void WaitServing(size_t i, absl::Duration timeout) {
    horovodd::daemon::EtcdOptions options;
    options.endpoints = {Endpoint(members_[i])};
    options.call_timeout = absl::Seconds(1);
    auto client = horovodd::daemon::EtcdClient::Create(options);
    REQUIRE(client.ok());
    etcdserverpb::RangeRequest probe;
    probe.set_key("probe");
    const absl::Time deadline = absl::Now() + timeout;
    absl::Status last;
    while (absl::Now() < deadline) {
      int status = 0;
      if (waitpid(members_[i].pid, &status, WNOHANG) == members_[i].pid) {
        members_[i].pid = -1;
        FAIL("etcd member " << members_[i].name << " exited; its log is in " << dir_.path());
      }
      last = (*client)->Range(probe).status();
      if (last.ok()) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL("etcd member " << members_[i].name << " did not serve within " << timeout << ": "
                        << last.ToString());
  }

  TempDir dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;
  std::string token_;
};

}  // namespace hvdd_test
