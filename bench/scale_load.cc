// Daemon scale benchmark: plays N workers of one job against one daemon
// (bench/scale_daemon.cc: horovodd's job manager and WorkerService with a
// launcher that records launches instead of starting processes).
//
// Each simulated worker does what the runtime does on start: attaches (hello,
// then heartbeats), asks for its rendezvous on its stream, then does the
// key-value traffic of a ring bootstrap (sets its own address key, reads its
// two neighbours'). It attaches either on an Attach stream of its own, as the
// runtime does (the default), or, with --workers-per-host K, through its
// simulated host's one AttachHost stream, which carries K consecutive
// launches' hellos, rendezvous and heartbeats (one message per heartbeat
// round for the whole host), as a host's aggregator would. All of it runs on
// gRPC's callback API: a handful of threads, whatever N is. One TCP
// connection per stream (worker or host), as real workers (hosts) have,
// unless the open file limit is lower (then a few share one); connections are
// opened before the clock starts.
//
// Once every ring could connect, one worker dies (the daemon's launcher reports
// its SIGKILL and its stream, or its part of its host's, ends) and the others
// wait for the new generation the daemon announces on their streams.
//
// Prints one line (then "ERROR <first error>" if there was one):
//   RESULT scale workers=N workers_per_host=K streams=.. connections=..
//          launched_s=.. ready_s=.. bootstrap_s=.. attached=.. heartbeat_ms=..
//          loss_s=.. loss_heard=.. rss_hwm_mb=.. rss_at_go_mb=.. threads=..
//          daemon_sockets=.. load_threads=.. daemon_cpu_s=.. daemon_launch_s=..
//          daemon_ready_s=.. load_cpu_s=.. errors=..
// ready_s: from the submit to the last rendezvous answer received (generation
// ready); bootstrap_s: to the last neighbour key read (every ring could
// connect); launched_s: to the last launch we heard of; streams: Attach or
// AttachHost streams; attached: workers that got a message of the daemon's;
// heartbeat_ms: the interval the daemon asked for (0: none); the daemon_*
// figures and the RSS and threads are the daemon's own (daemon_ready_s: its
// MEMBERSHIP event; daemon_cpu_s: its CPU from the submit on); load_cpu_s:
// this process's CPU from the submit to the end (all simulated workers'
// client side); loss_s: from the kill to the last survivor hearing of the new
// generation, loss_heard: how many survivors heard of it; threads and
// daemon_sockets are the daemon's threads and open sockets (its connections
// and listeners), load_threads this process's.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "horovodd.grpc.pb.h"
#include "scale_process.h"
#include "scale_sim.h"

namespace horovodd::bench {
namespace {

struct Options {
  std::string daemon_binary;
  int workers = 1024;
  int slots = 8;
  int workers_per_connection = 0;       // 0: 1, or as few as the open file limit allows
  int workers_per_host = 0;             // 0: every worker on its own Attach stream
  int heartbeat_ms = 500;               // the runtime's default, until the daemon names one
  int connections_per_address = 25000;  // below the ephemeral ports of one address
  double timeout_s = 300;
};

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--daemon-binary")
      o.daemon_binary = value;
    else if (flag == "--workers")
      o.workers = std::atoi(value.c_str());
    else if (flag == "--slots")
      o.slots = std::atoi(value.c_str());
    else if (flag == "--workers-per-connection")
      o.workers_per_connection = std::atoi(value.c_str());
    else if (flag == "--workers-per-host")
      o.workers_per_host = std::atoi(value.c_str());
    else if (flag == "--connections-per-address")
      o.connections_per_address = std::atoi(value.c_str());
    else if (flag == "--heartbeat-ms")
      o.heartbeat_ms = std::atoi(value.c_str());
    else if (flag == "--timeout")
      o.timeout_s = std::atof(value.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return false;
    }
  }
  if ((argc - 1) % 2 != 0 || o.daemon_binary.empty() || o.workers < 1 || o.slots < 1 ||
      o.workers_per_connection < 0 || o.workers_per_host < 0 || o.heartbeat_ms < 1 ||
      o.connections_per_address < 1) {
    std::fprintf(stderr,
                 "usage: %s --daemon-binary PATH [--workers N] [--slots N]"
                 " [--workers-per-connection N (0: auto)] [--workers-per-host N (0: one"
                 " Attach stream per worker)] [--connections-per-address N]"
                 " [--heartbeat-ms MS] [--timeout S]\n",
                 argv[0]);
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, options)) return 2;
  signal(SIGPIPE, SIG_IGN);

  // One connection per worker (or per host, with --workers-per-host), as
  // real workers (hosts) have, where the open file limit (of each side: the
  // daemon inherits ours) allows; else they share connections as evenly as
  // it allows. A host's workers are consecutive launches.
  const int per_stream = std::max(options.workers_per_host, 1);
  const int streams = (options.workers + per_stream - 1) / per_stream;
  RaiseOpenFileLimit(static_cast<uint64_t>(streams) + 4096);
  int streams_per_connection = 1;
  {
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    const int64_t usable = std::max<int64_t>(static_cast<int64_t>(limit.rlim_cur) - 2048, 1);
    streams_per_connection = static_cast<int>((streams + usable - 1) / usable);
  }
  if (options.workers_per_connection == 0) {
    options.workers_per_connection = streams_per_connection * per_stream;
  } else {
    streams_per_connection = std::max(options.workers_per_connection / per_stream, 1);
    options.workers_per_connection = streams_per_connection * per_stream;
  }
  // Separate subchannel pools give each channel its own TCP connection.
  const int connections =
      (options.workers + options.workers_per_connection - 1) / options.workers_per_connection;
  const int addresses =
      (connections + options.connections_per_address - 1) / options.connections_per_address;
  if (addresses > 254) {
    std::fprintf(stderr, "%d connections need more than 254 loopback addresses\n", connections);
    return 2;
  }

  DaemonProcess daemon;
  if (!daemon.Start(options.daemon_binary, options.workers, options.slots, addresses,
                    connections)) {
    std::fprintf(stderr, "cannot start %s\n", options.daemon_binary.c_str());
    return 1;
  }
  const std::string addr_line = daemon.ReadLine();
  if (addr_line.rfind("ADDR ", 0) != 0) {
    std::fprintf(stderr, "stand-in daemon did not start: '%s'\n", addr_line.c_str());
    daemon.Kill();
    return 1;
  }
  const std::string address = addr_line.substr(5);
  const std::string port = address.substr(address.rfind(':') + 1);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  for (int i = 0; i < connections; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // As the runtime's DaemonClient: no BDP pings (the daemon answers them).
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    // The load generator's own cost, not the daemon's: the retry filter buffers
    // every call. Real workers pay that on their own hosts' CPUs.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    const std::string target = absl::StrCat("127.0.0.", 1 + i % addresses, ":", port);
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60))) {
      std::fprintf(stderr, "connection %d to %s failed\n", i, target.c_str());
      daemon.Kill();
      return 1;
    }
    stubs.push_back(v1::WorkerService::NewStub(channel));
    channels.push_back(std::move(channel));
  }

  Shared shared;
  // Each worker's stream (its own, or its host's: then shared by its host's
  // workers), by launch order.
  std::vector<std::unique_ptr<SimStream>> streams_owned;
  std::vector<SimStream*> worker_stream;
  std::vector<int64_t> worker_ids;
  streams_owned.reserve(streams);
  std::mutex workers_mu;  // the heartbeat thread reads `streams_owned` while it grows
  const double cpu_at_go_s = CpuSeconds();
  shared.start = Clock::now();
  daemon.Send("GO");
  double last_launch_s = 0;
  for (int i = 0; i < options.workers; ++i) {
    const std::string line = daemon.ReadLine();
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 4 || parts[0] != "LAUNCH") {
      std::fprintf(stderr, "unexpected line from the stand-in daemon: '%s'\n", line.c_str());
      daemon.Kill();
      _exit(1);
    }
    v1::WorkerIdentity who;
    who.set_job_id(parts[1]);
    who.set_worker_id(std::atoll(parts[2].c_str()));
    if (parts[3] != "-") who.set_token(parts[3]);
    v1::WorkerService::Stub* stub = stubs[i / options.workers_per_connection].get();
    worker_ids.push_back(who.worker_id());
    if (options.workers_per_host > 0) {
      // A host's stream starts with its first worker, before the heartbeat
      // thread can see it; later workers join it.
      if (i % options.workers_per_host == 0) {
        auto host = std::make_unique<SimHost>(stub, &shared,
                                              std::chrono::milliseconds(options.heartbeat_ms));
        host->AddWorker(who);
        worker_stream.push_back(host.get());
        std::lock_guard<std::mutex> lock(workers_mu);
        streams_owned.push_back(std::move(host));
      } else {
        auto* host = static_cast<SimHost*>(worker_stream.back());
        host->AddWorker(who);
        worker_stream.push_back(host);
      }
    } else {
      auto worker = std::make_unique<SimWorker>(stub, &shared, who,
                                                std::chrono::milliseconds(options.heartbeat_ms));
      // Started before the heartbeat thread can see it: a heartbeat written
      // on a stream not yet started crashes the reactor.
      worker->Start();
      worker_stream.push_back(worker.get());
      std::lock_guard<std::mutex> lock(workers_mu);
      streams_owned.push_back(std::move(worker));
    }
    last_launch_s = SecondsSince(shared.start);
    if (i == 0) {
      // The heartbeat thread starts with the first worker. Each worker keeps
      // its own schedule (as separate processes would), so the ticks only
      // need to be fine enough not to delay a heartbeat noticeably.
      std::thread([&] {
        while (true) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          const int64_t now_us = NowUs();
          std::lock_guard<std::mutex> lock(workers_mu);
          for (auto& stream : streams_owned) stream->Heartbeat(1, now_us);
        }
      }).detach();
    }
  }

  bool complete = false;
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    complete = shared.cv.wait_for(lock, std::chrono::duration<double>(options.timeout_s), [&] {
      return shared.errors > 0 || shared.bootstrap_done == options.workers;
    });
  }
  // One worker dies: the daemon hears of its exit, its connection closes.
  double loss_start_s = 0;
  const int victim = options.workers / 2;
  const int survivors = options.workers - 1;
  bool bootstrapped = false;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    bootstrapped = complete && shared.errors == 0;
    loss_start_s = SecondsSince(shared.start);
  }
  // Only after a clean start: a generation the daemon moved on from by itself
  // would count as heard.
  if (bootstrapped && survivors > 0) {
    daemon.Send(absl::StrCat("KILL ", victim + 1).c_str());  // launch order, from 1
    worker_stream[victim]->Lose(worker_ids[victim]);
    std::unique_lock<std::mutex> lock(shared.mu);
    if (!shared.cv.wait_for(lock, std::chrono::duration<double>(options.timeout_s),
                            [&] { return shared.errors > 0 || shared.loss_heard >= survivors; })) {
      if (shared.errors++ == 0) {
        shared.first_error = absl::StrCat("after a worker's loss only ", shared.loss_heard, " of ",
                                          survivors, " survivors heard of a new generation");
      }
    }
  }
  const long load_threads = ThreadCount();
  int notified = 0;
  int64_t heartbeat_ms = 0;  // what the daemon asked for (the last worker's), 0 if never
  {
    std::lock_guard<std::mutex> lock(workers_mu);
    for (auto& stream : streams_owned) {
      notified += stream->AttachedWorkers();
      if (const int64_t ms = stream->heard_interval_ms(); ms > 0) heartbeat_ms = ms;
    }
  }
  const double load_cpu_s = CpuSeconds() - cpu_at_go_s;
  daemon.Send("QUIT");
  std::string stats = daemon.ReadLine();
  while (!stats.empty() && stats.rfind("STATS ", 0) != 0) stats = daemon.ReadLine();  // relaunches
  daemon.Kill(/*grace_s=*/10);

  long rss_hwm_kb = 0, rss_at_go_kb = 0, threads = 0, daemon_sockets = 0;
  double daemon_cpu_s = 0, daemon_launch_s = 0, daemon_ready_s = 0;
  for (absl::string_view part : absl::StrSplit(stats, ' ')) {
    const std::string value(part.substr(part.find('=') + 1));
    if (absl::ConsumePrefix(&part, "rss_hwm_kb=")) rss_hwm_kb = std::atol(value.c_str());
    if (absl::ConsumePrefix(&part, "rss_at_go_kb=")) rss_at_go_kb = std::atol(value.c_str());
    if (absl::ConsumePrefix(&part, "threads=")) threads = std::atol(value.c_str());
    if (absl::ConsumePrefix(&part, "sockets=")) daemon_sockets = std::atol(value.c_str());
    if (absl::ConsumePrefix(&part, "cpu_s=")) daemon_cpu_s = std::atof(value.c_str());
    if (absl::ConsumePrefix(&part, "launch_span_s=")) daemon_launch_s = std::atof(value.c_str());
    if (absl::ConsumePrefix(&part, "ready_s=")) daemon_ready_s = std::atof(value.c_str());
  }
  std::lock_guard<std::mutex> lock(shared.mu);
  if (!complete && shared.errors == 0) {
    shared.errors = 1;
    shared.first_error =
        absl::StrCat("timed out after ", options.timeout_s, " s with ", shared.rendezvous_done,
                     " rendezvous and ", shared.bootstrap_done, " bootstraps done");
  }
  std::printf(
      "RESULT scale workers=%d workers_per_host=%d streams=%d connections=%d launched_s=%.3f "
      "ready_s=%.3f bootstrap_s=%.3f "
      "attached=%d heartbeat_ms=%lld loss_s=%.3f loss_heard=%d rss_hwm_mb=%.1f "
      "rss_at_go_mb=%.1f threads=%ld daemon_sockets=%ld load_threads=%ld "
      "daemon_cpu_s=%.2f daemon_launch_s=%.3f daemon_ready_s=%.3f load_cpu_s=%.2f errors=%d\n",
      options.workers, options.workers_per_host, streams, connections, last_launch_s,
      shared.last_ready_s, shared.last_bootstrap_s, notified, static_cast<long long>(heartbeat_ms),
      shared.loss_heard > 0 ? shared.last_loss_heard_s - loss_start_s : -1.0, shared.loss_heard,
      rss_hwm_kb / 1024.0, rss_at_go_kb / 1024.0, threads, daemon_sockets, load_threads,
      daemon_cpu_s, daemon_launch_s, daemon_ready_s, load_cpu_s, shared.errors);
  if (shared.errors > 0) std::printf("ERROR %s\n", shared.first_error.c_str());
  std::fflush(stdout);
  // Thousands of streams to a daemon that is gone: nothing worth tearing down.
  _exit(shared.errors > 0 ? 1 : 0);
}

}  // namespace
}  // namespace horovodd::bench

int main(int argc, char** argv) {
  // As horovodd does (DaemonServer::Start): Debian's Abseil checks lock order
  // on every absl::Mutex lock (gRPC's too) unless told not to.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return horovodd::bench::Main(argc, argv);
}
