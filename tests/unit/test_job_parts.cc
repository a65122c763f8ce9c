// The parts a JobDriver coordinates, each on its own: the reset history, the
// worker table, the generation planner and the liveness monitor. No loop, no
// threads: each test feeds a part facts and times and checks what the driver
// would show a user (status fields, rendezvous answers, lost reasons).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "daemon/job_events/reset_history.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/workers/liveness_monitor.h"
#include "daemon/workers/worker_table.h"
#include "discovery/host_manager.h"
#include "job_spec_support.h"

namespace horovodd::daemon {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

double Unix(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// ---- ResetHistory

TEST_CASE("reset history: a reset counts from its first detection to its generation's ready",
          "[job_parts]") {
  ResetHistory history;
  CHECK_FALSE(history.reset_running());
  history.Detected(kT0);
  history.Detected(kT0 + absl::Seconds(3));  // the same reset, seen again
  CHECK(history.reset_running());
  history.Began(2, "worker 1 exited", kT0 + absl::Seconds(4));
  CHECK(history.resets() == 1);
  REQUIRE(history.records().size() == 1);
  CHECK(history.records()[0].generation() == 2);
  CHECK(history.records()[0].cause() == "worker 1 exited");
  CHECK(history.records()[0].detected_unix() == Unix(kT0));

  // A commit before the generation formed is no resumption.
  history.Committed(2, 5, kT0 + absl::Seconds(5));
  CHECK(history.records()[0].resumed_unix() == 0);
  CHECK(history.last_commit() == 5);

  auto took = history.Ready(2, kT0 + absl::Seconds(10));
  REQUIRE(took.has_value());
  CHECK(*took == absl::Seconds(10));
  CHECK_FALSE(history.reset_running());
  CHECK(history.records()[0].ready_unix() == Unix(kT0 + absl::Seconds(10)));

  history.Committed(2, 6, kT0 + absl::Seconds(12));
  history.Committed(2, 7, kT0 + absl::Seconds(13));  // only the first one resumes
  CHECK(history.records()[0].resumed_unix() == Unix(kT0 + absl::Seconds(12)));
  CHECK(history.last_commit() == 7);
  history.Committed(2, 3, kT0 + absl::Seconds(14));  // an older commit changes nothing
  CHECK(history.last_commit() == 7);
}

TEST_CASE("reset history: a generation planned without a detected reset counts from its plan",
          "[job_parts]") {
  ResetHistory history;
  history.Began(2, "hosts changed", kT0);
  CHECK(history.records()[0].detected_unix() == Unix(kT0));
  CHECK_FALSE(history.Ready(2, kT0 + absl::Seconds(1)).has_value());  // no reset was running
}

TEST_CASE("reset history: keeps the newest records only", "[job_parts]") {
  ResetHistory history;
  const int n = static_cast<int>(ResetHistory::kMaxRecords) + 20;
  for (int g = 2; g < 2 + n; ++g) history.Began(g, "cause", kT0);
  CHECK(history.resets() == n);
  REQUIRE(history.records().size() == ResetHistory::kMaxRecords);
  CHECK(history.records().front().generation() == 2 + 20);
  CHECK(history.records().back().generation() == 2 + n - 1);
}

// ---- WorkerTable

TEST_CASE("worker table: ids count up, an exit ends the process and refuses its pending call",
          "[job_parts]") {
  WorkerTable table;
  Worker& a = table.Add("host-a", 0);
  Worker& b = table.Add("host-b", 1);
  CHECK(a.id == 1);
  CHECK(b.id == 2);
  CHECK(table.Find(3) == nullptr);
  CHECK(table.AllGone());  // nothing started yet

  WorkerTable::Started(a, LaunchedProcess{7, 4242});
  CHECK(a.pid == 4242);
  CHECK_FALSE(table.AllGone());

  absl::Status answer;
  a.waiting = true;
  a.reply = [&](absl::StatusOr<v1::RendezvousResponse> r) { answer = r.status(); };
  ExitInfo killed;
  killed.signal = 9;
  WorkerTable::Exited(a, killed);
  CHECK(absl::IsAborted(answer));
  CHECK_FALSE(a.waiting);
  CHECK(a.exit_code == 128 + 9);
  CHECK(a.gone());
  CHECK(table.AllGone());

  table.Erase(b.id);
  CHECK(table.Find(2) == nullptr);
  CHECK(table.Add("host-c", 0).id == 3);  // never reused
}

TEST_CASE("worker table: output lines carry the worker's rank at the time of the line",
          "[job_parts]") {
  WorkerTable table;
  Worker& w = table.Add("host-a", 3);
  EventLog events;
  auto sink = WorkerTable::OutputSink(w, &events);
  sink(OutputStream::kStdout, "planned");
  w.rank->store(0);
  sink(OutputStream::kStderr, "ranked");
  auto lines = events.OutputOfRank(3, 10);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].message() == "planned");
  CHECK(lines[0].stream() == "stdout");
  lines = events.OutputOfRank(0, 10);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].message() == "ranked");
  CHECK(lines[0].stream() == "stderr");
}

// ---- GenerationPlanner

// A table of `n` started workers on `host`, all waiting for a generation
// after `after`.
void AddWaiting(WorkerTable& table, int n, const std::string& host, int64_t after = 0) {
  for (int i = 0; i < n; ++i) {
    Worker& w = table.Add(host, i);
    WorkerTable::Started(w, LaunchedProcess{w.id, static_cast<int>(w.id)});
    w.waiting = true;
    w.after_generation = after;
  }
}

std::vector<int64_t> Ids(const std::vector<Member>& members) {
  std::vector<int64_t> ids;
  for (const Member& m : members) ids.push_back(m.worker_id);
  return ids;
}

discovery::HostManager Hosts(const discovery::HostSet& hosts) {
  discovery::HostManager manager(discovery::CooldownPolicy{absl::Seconds(1), absl::Seconds(2)});
  manager.UpdateDiscovered(hosts);
  return manager;
}

// Plans and forms the first generation of the workers waiting in `table`.
void FormFirstGeneration(GenerationPlanner& planner, WorkerTable& table,
                         const discovery::HostManager& hosts) {
  planner.Begin(planner.Next(table, hosts, kT0), kT0);
  for (const auto& [id, w] : table) planner.AddMember(id);
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
}

// Worker `id` on `host` exits with status 1: failed, and its host blacklisted.
void FailWorker(WorkerTable& table, discovery::HostManager& hosts, int64_t id,
                const std::string& host) {
  WorkerTable::Exited(table.at(id), ExitInfo{1, 0});
  table.at(id).state = v1::WORKER_FAILED;
  hosts.ReportFailure(host, "exited with status 1", kT0);
}

TEST_CASE("generation planner: the first generation uses every usable slot up to --max-np",
          "[job_parts]") {
  // Hosts in the order discovery listed them: rank 0 on the first one.
  GenerationPlanner planner(/*max_np=*/5);
  WorkerTable table;
  Plan plan = planner.Next(table, Hosts({{"b", 4}, {"a", 2}}), kT0);
  CHECK(plan.new_hosts == std::vector<std::string>{"b", "b", "b", "b", "a"});
  CHECK(plan.survivors.empty());
  GenerationPlanner unlimited(/*max_np=*/0);
  CHECK(unlimited.Next(table, Hosts({{"b", 4}, {"a", 2}}), kT0).size() == 6);
}

TEST_CASE("generation planner: a blacklisted host's workers leave when others survive",
          "[job_parts]") {
  GenerationPlanner planner(/*max_np=*/0);
  WorkerTable table;
  AddWaiting(table, 2, "a");
  AddWaiting(table, 2, "b");
  discovery::HostManager hosts = Hosts({{"a", 2}, {"b", 2}});
  Plan first = planner.Next(table, hosts, kT0);
  planner.Begin(first, kT0);
  for (const auto& [id, w] : table) planner.AddMember(id);
  FailWorker(table, hosts, 1, "a");
  Plan next = planner.Next(table, hosts, kT0);
  CHECK(Ids(next.survivors) == std::vector<int64_t>{3, 4});
  CHECK(next.left_blacklisted == std::vector<int64_t>{2});
  CHECK(next.new_hosts.empty());
}

TEST_CASE("generation planner: workers held from leaving count again in the next plan",
          "[job_parts]") {
  GenerationPlanner planner(/*max_np=*/0);
  WorkerTable table;
  AddWaiting(table, 2, "a");
  AddWaiting(table, 2, "b");
  discovery::HostManager hosts = Hosts({{"a", 2}, {"b", 2}});
  FormFirstGeneration(planner, table, hosts);

  // A worker on a fails: a is blacklisted, its other worker is held.
  FailWorker(table, hosts, 2, "a");
  Plan without_a = planner.Next(table, hosts, kT0);
  CHECK(Ids(without_a.survivors) == std::vector<int64_t>{3, 4});
  planner.Begin(without_a, kT0);
  CHECK(planner.Holds(1));
  CHECK_FALSE(planner.IsMember(1));
  table.at(1).state = v1::WORKER_REMOVED;
  // Planning again with nothing new leaves the held worker out again: the
  // same generation, not a new one.
  Plan again = planner.Next(table, hosts, kT0);
  CHECK(again.removed == std::vector<int64_t>{1});
  CHECK(planner.Unchanged(again));

  // Before that plan forms a worker on b fails too: every survivor is on a
  // blacklisted host, and the held one counts among them, in its old order.
  FailWorker(table, hosts, 3, "b");
  Plan both = planner.Next(table, hosts, kT0);
  CHECK(Ids(both.survivors) == std::vector<int64_t>{1, 4});
  CHECK(both.kept_on_blacklisted);
  CHECK(both.removed.empty());
  CHECK_FALSE(planner.Unchanged(both));  // as many members as before, not the same ones
  planner.Begin(both, kT0);
  CHECK_FALSE(planner.Holds(1));
  CHECK(planner.TakeHeld().empty());
}

TEST_CASE("generation planner: held workers are let go once the plan forms", "[job_parts]") {
  GenerationPlanner planner(/*max_np=*/0);
  WorkerTable table;
  AddWaiting(table, 2, "a");
  AddWaiting(table, 2, "b");
  discovery::HostManager hosts = Hosts({{"a", 2}, {"b", 2}});
  FormFirstGeneration(planner, table, hosts);
  FailWorker(table, hosts, 1, "a");
  planner.Begin(planner.Next(table, hosts, kT0), kT0);
  CHECK(planner.Holds(2));
  for (int64_t id : {3, 4}) table.at(id).after_generation = 1;
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  CHECK(planner.TakeHeld() == std::vector<int64_t>{2});
  CHECK_FALSE(planner.Holds(2));
}

TEST_CASE("generation planner: forms a generation once every member waits, then answers ranks",
          "[job_parts]") {
  GenerationPlanner planner(2);
  WorkerTable table;
  AddWaiting(table, 2, "a");
  table.at(2).waiting = false;
  planner.Begin(Plan{}, kT0);
  planner.AddMember(1);
  planner.AddMember(2);
  CHECK(planner.generation() == 1);
  CHECK(planner.rendezvous_open());
  CHECK(planner.planned_at() == kT0);
  CHECK_FALSE(planner.AllWaiting(table));

  table.at(2).waiting = true;
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  CHECK_FALSE(planner.rendezvous_open());
  CHECK(planner.RankOf(2) == 1);
  CHECK(planner.RankOf(99) == -1);

  v1::RendezvousResponse answer = planner.ReadyAnswer(table.at(2), 1);
  CHECK(answer.generation() == 1);
  CHECK(answer.rank() == 1);
  CHECK(answer.size() == 2);
  CHECK(answer.local_rank() == 1);
  CHECK(answer.local_size() == 2);
  CHECK(answer.shrinks_generation() == 0);
  CHECK(table.at(2).state == v1::WORKER_RUNNING);
  CHECK(table.at(2).joined_generation == 1);
  CHECK(table.at(2).rank->load() == 1);
  CHECK(planner.RemovedAnswer().removed());
}

TEST_CASE("generation planner: members and ranks are known through every change", "[job_parts]") {
  GenerationPlanner planner(0);
  WorkerTable table;
  AddWaiting(table, 4, "a");
  planner.Begin(Plan{}, kT0);
  for (int64_t id : {1, 2, 3, 4}) planner.AddMember(id);
  planner.RemoveMember(3);
  CHECK(planner.IsMember(1));
  CHECK_FALSE(planner.IsMember(3));
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  CHECK(planner.RankOf(4) == 2);
  CHECK(planner.RankOf(3) == -1);

  // The next plan keeps 4 and 1, in that order; the ranks stay the ready
  // generation's until it forms.
  Plan next;
  next.survivors = {{4, "a"}, {1, "a"}};
  planner.Begin(next, kT0);
  CHECK(planner.IsMember(4));
  CHECK_FALSE(planner.IsMember(2));
  CHECK(planner.RankOf(2) == 1);
  for (int64_t id : {1, 4}) table.at(id).after_generation = 1;
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  CHECK(planner.RankOf(4) == 0);
  CHECK(planner.RankOf(1) == 1);
  CHECK(planner.RankOf(2) == -1);

  // Taken back after a restart: the ready members' ranks, the planned ones' membership.
  GenerationPlanner restored(0);
  restored.Restore(/*ready=*/3, {2, 1}, /*planned=*/4, {}, table, kT0);
  CHECK(restored.RankOf(1) == 1);
  CHECK(restored.IsMember(2));
  GenerationPlanner planned(0);
  planned.Restore(/*ready=*/0, {}, /*planned=*/1, {3, 4}, table, kT0);
  CHECK(planned.IsMember(3));
  CHECK_FALSE(planned.IsMember(1));
  CHECK(planned.RankOf(3) == -1);
}

TEST_CASE("bind addresses: each host is looked up once", "[job_parts]") {
  std::map<std::string, int> lookups;
  BindAddresses addresses([&lookups](const std::string& host) {
    ++lookups[host];
    return "addr-of-" + host;
  });
  CHECK(addresses.For("node1") == "addr-of-node1");
  CHECK(addresses.For("node1") == "addr-of-node1");
  CHECK(addresses.For("node2") == "addr-of-node2");
  CHECK(lookups == std::map<std::string, int>{{"node1", 1}, {"node2", 1}});
  // The lookup itself: localhost and addresses need no name service.
  CHECK(BindAddressFor("localhost") == "127.0.0.1");
  CHECK(BindAddressFor("10.1.2.3") == "10.1.2.3");
}

TEST_CASE("generation planner: a ready answer names its host's bind address", "[job_parts]") {
  GenerationPlanner planner(0);
  WorkerTable table;
  AddWaiting(table, 2, "localhost");
  planner.Begin(Plan{}, kT0);
  for (int64_t id : {1, 2}) planner.AddMember(id);
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  CHECK(planner.ReadyAnswer(table.at(1), 0).bind_address() == "127.0.0.1");
  CHECK(planner.bind_addresses().For("localhost") == "127.0.0.1");
}

TEST_CASE("generation planner: a generation that only drops workers shrinks the last one",
          "[job_parts]") {
  GenerationPlanner planner(3);
  WorkerTable table;
  AddWaiting(table, 3, "a");
  planner.Begin(Plan{}, kT0);
  for (int64_t id : {1, 2, 3}) planner.AddMember(id);
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);

  // Worker 2 leaves: generation 2 is generation 1 without its rank 1.
  Plan shrink;
  shrink.survivors = {{1, "a"}, {3, "a"}};
  planner.Begin(shrink, kT0 + absl::Seconds(1));
  for (int64_t id : {1, 3}) table.at(id).after_generation = 1;
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  v1::RendezvousResponse answer = planner.ReadyAnswer(table.at(3), 1);
  CHECK(answer.generation() == 2);
  CHECK(answer.size() == 2);
  CHECK(answer.shrinks_generation() == 1);
  CHECK(std::vector<int>(answer.excluded_ranks().begin(), answer.excluded_ranks().end()) ==
        std::vector<int>{1});
}

TEST_CASE("generation planner: members of a growing job are told once every joiner waits",
          "[job_parts]") {
  GenerationPlanner planner(2);
  WorkerTable table;
  AddWaiting(table, 1, "a");
  planner.Begin(Plan{}, kT0);
  planner.AddMember(1);
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  table.at(1).waiting = false;  // training

  Plan grow;
  grow.survivors = {{1, "a"}};
  planner.Begin(grow, kT0 + absl::Seconds(5));
  Worker& joiner = table.Add("a", 1);
  planner.AddMember(joiner.id);
  planner.ExpectJoiners(1);
  CHECK(planner.joiners_pending());
  CHECK_FALSE(planner.Told(1));  // trains on, not told yet
  CHECK(planner.Told(joiner.id));

  CHECK_FALSE(planner.JoinersWait(table, kT0 + absl::Seconds(6)));
  joiner.waiting = true;
  CHECK(planner.JoinersWait(table, kT0 + absl::Seconds(9)));
  CHECK_FALSE(planner.joiners_pending());
  CHECK(planner.Told(1));
  CHECK(planner.planned_at() == kT0 + absl::Seconds(9));  // its join timeout counts from here
}

// ---- LivenessMonitor

struct LivenessCase {
  LivenessCase() : spec(testing::OneLocalWorkerSpec({"train"})) {
    spec.set_start_timeout_seconds(10);
    spec.set_liveness_timeout_seconds(5);
    spec.set_elastic_timeout_seconds(20);
  }
  v1::JobSpec spec;
  WorkerTable table;
  GenerationPlanner planner{1};
};

std::vector<std::string> Reasons(const std::vector<LivenessMonitor::Lost>& lost) {
  std::vector<std::string> reasons;
  for (const auto& l : lost) reasons.push_back(std::to_string(l.worker_id) + ": " + l.reason);
  return reasons;
}

TEST_CASE("liveness: a worker that never connects is lost after --start-timeout", "[job_parts]") {
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& w = c.table.Add("a", 0);
  WorkerTable::Started(w, LaunchedProcess{1, 1});
  monitor.Launched(w.id, kT0);
  CHECK(monitor.Check(kT0 + absl::Seconds(10), c.table).empty());
  CHECK(Reasons(monitor.Check(kT0 + absl::Seconds(11), c.table)) ==
        std::vector<std::string>{"1: did not connect within --start-timeout 10s"});
  // Gone workers are nobody's concern.
  WorkerTable::Exited(w, ExitInfo{});
  CHECK(monitor.Check(kT0 + absl::Seconds(11), c.table).empty());
}

TEST_CASE("liveness: --start-timeout runs from launch to the first rendezvous", "[job_parts]") {
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& slow = c.table.Add("a", 0);
  WorkerTable::Started(slow, LaunchedProcess{1, 1});
  Worker& fast = c.table.Add("a", 1);
  WorkerTable::Started(fast, LaunchedProcess{2, 2});
  monitor.Launched(slow.id, kT0);
  monitor.Launched(fast.id, kT0);
  // Both connect and heartbeat; only one asks for a generation.
  for (int s = 1; s <= 11; ++s) {
    monitor.Seen(slow.id, kT0 + absl::Seconds(s));
    monitor.Seen(fast.id, kT0 + absl::Seconds(s));
    if (s == 9) monitor.AskedRendezvous(fast.id);
  }
  CHECK(Reasons(monitor.Check(kT0 + absl::Seconds(11), c.table)) ==
        std::vector<std::string>{"1: did not ask for a rendezvous within --start-timeout 10s"});
}

TEST_CASE("liveness: a connected worker is lost once silent past --liveness-timeout",
          "[job_parts]") {
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& w = c.table.Add("a", 0);
  WorkerTable::Started(w, LaunchedProcess{1, 1});
  monitor.Launched(w.id, kT0);
  w.attached = true;
  monitor.Seen(w.id, kT0 + absl::Seconds(1));
  monitor.AskedRendezvous(w.id);
  CHECK(monitor.Check(kT0 + absl::Seconds(6), c.table).empty());
  CHECK(Reasons(monitor.Check(kT0 + absl::Milliseconds(6500), c.table)) ==
        std::vector<std::string>{"1: silent for 5500 ms (--liveness-timeout 5s)"});
  monitor.Seen(w.id, kT0 + absl::Seconds(6));
  CHECK(monitor.Check(kT0 + absl::Milliseconds(6500), c.table).empty());
  CHECK(monitor.period() == absl::Milliseconds(625));  // an eighth of the timeout, at most 1 s
}

TEST_CASE("liveness: time the daemon was not listening is no worker's silence", "[job_parts]") {
  // Only the stall is taken off: a daemon that stalls again and again still
  // finds a silent worker once it has listened for the timeout in all.
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& heard = c.table.Add("a", 0);
  WorkerTable::Started(heard, LaunchedProcess{1, 1});
  Worker& starting = c.table.Add("a", 1);
  WorkerTable::Started(starting, LaunchedProcess{2, 2});
  monitor.Launched(heard.id, kT0);
  monitor.Launched(starting.id, kT0);
  heard.attached = true;
  monitor.Seen(heard.id, kT0 + absl::Seconds(1));
  monitor.AskedRendezvous(heard.id);
  // The daemon was stopped from 2 s to 20 s: what its workers sent is unread.
  monitor.Deaf(absl::Seconds(18));
  CHECK(monitor.Check(kT0 + absl::Seconds(20), c.table).empty());
  CHECK(monitor.Check(kT0 + absl::Seconds(24), c.table).empty());
  // Silent for the liveness timeout (5 s) and the start timeout (10 s) of
  // time the daemon listened: lost, with its whole silence named.
  CHECK(Reasons(monitor.Check(kT0 + absl::Milliseconds(24500), c.table)) ==
        std::vector<std::string>{"1: silent for 23500 ms (--liveness-timeout 5s)"});
  CHECK(Reasons(monitor.Check(kT0 + absl::Seconds(29), c.table)) ==
        std::vector<std::string>{"1: silent for 28000 ms (--liveness-timeout 5s)",
                                 "2: did not connect within --start-timeout 10s"});
  // Heard from once it listens again: alive.
  monitor.Seen(heard.id, kT0 + absl::Seconds(21));
  CHECK(Reasons(monitor.Check(kT0 + absl::Seconds(26), c.table)).empty());
}

TEST_CASE("liveness: a worker that closed its stream gets the runtime's grace to exit",
          "[job_parts]") {
  // Its runtime shut down; the interpreter takes its time to exit.
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& w = c.table.Add("a", 0);
  WorkerTable::Started(w, LaunchedProcess{1, 1});
  monitor.Launched(w.id, kT0);
  monitor.Seen(w.id, kT0);
  monitor.AskedRendezvous(w.id);
  w.attached = false;  // detached
  CHECK(monitor.Check(kT0 + absl::Seconds(30), c.table).empty());
  CHECK(Reasons(monitor.Check(kT0 + absl::Seconds(31), c.table)) ==
        std::vector<std::string>{
            "1: silent for 31000 ms after closing its stream (--liveness-timeout 5s)"});
}

TEST_CASE("liveness: a member that heartbeats is never lost for not joining a generation",
          "[job_parts]") {
  // --elastic-timeout bounds only the wait for --min-np slots, as in Horovod:
  // a member in a long step joins when its step ends.
  LivenessCase c;
  LivenessMonitor monitor(c.spec);
  Worker& w = c.table.Add("a", 0);
  WorkerTable::Started(w, LaunchedProcess{1, 1});
  monitor.Launched(w.id, kT0);
  monitor.AskedRendezvous(w.id);
  c.planner.Begin(Plan{}, kT0);
  c.planner.AddMember(w.id);
  for (int s = 1; s <= 120; ++s) monitor.Seen(w.id, kT0 + absl::Seconds(s));
  CHECK(monitor.Check(kT0 + absl::Seconds(120), c.table).empty());
}

TEST_CASE("generation planner: a ready spare takes a failed member's place",
          "[job_parts][spares]") {
  GenerationPlanner planner(/*max_np=*/0, /*hot_spares=*/2, /*first_size=*/2);
  WorkerTable table;
  discovery::HostManager hosts = Hosts({{"a", 2}, {"b", 1}, {"c", 1}});
  Plan first = planner.Next(table, hosts, kT0);
  CHECK(first.new_hosts == std::vector<std::string>{"a", "a"});
  CHECK(first.spare_hosts == std::vector<std::string>{"b", "c"});
  planner.Begin(first, kT0);
  AddWaiting(table, 2, "a");
  for (const auto& [id, w] : table) planner.AddMember(id);
  REQUIRE(planner.AllWaiting(table));
  planner.MarkReady(table);
  // Two spares: 3 on b still starting, 4 on c waiting (ready).
  table.Add("b", -1).state = v1::WORKER_SPARE_STARTING;
  WorkerTable::Started(table.at(3), LaunchedProcess{3, 3});
  AddWaiting(table, 1, "c");
  table.at(4).state = v1::WORKER_SPARE_READY;
  CHECK(IsSpare(table.at(3)));
  CHECK(planner.Unchanged(planner.Next(table, hosts, kT0)));

  WorkerTable::Exited(table.at(1), ExitInfo{1, 0});
  table.at(1).state = v1::WORKER_FAILED;
  hosts.ReportFailure("a", "exited with status 1", kT0);
  Plan next = planner.Next(table, hosts, kT0);
  // a is blacklisted, but worker 2 is the only survivor and stays; the ready spare takes the
  // lost place, the one still starting stays a spare.
  CHECK(Ids(next.survivors) == std::vector<int64_t>{2});
  CHECK(next.kept_on_blacklisted);
  CHECK(Ids(next.promoted) == std::vector<int64_t>{4});
  CHECK(next.spares == 1);
  CHECK(next.spare_hosts.empty());
  CHECK_FALSE(planner.Unchanged(next));
  planner.Begin(next, kT0);
  CHECK(planner.members() == std::vector<int64_t>{2, 4});
}

}  // namespace
}  // namespace horovodd::daemon
