// horovodctl's output without a daemon: tables, status details, watch lines,
// and the JSON documents scripts read.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/horovodctl/horovodctl_format.h"
#include "cli/horovodctl/horovodctl_table.h"
#include "message_json/message_json.h"

using namespace horovodd;
using horovodd::cli::WatchFilter;

namespace {

const absl::TimeZone kUtc = absl::UTCTimeZone();
// 2024-01-02 03:04:05 UTC.
constexpr double kCreated = 1704164645;

v1::JobStatus RunningJob() {
  v1::JobStatus job;
  job.set_job_id("job-7");
  job.mutable_spec()->add_argv("/opt/train");
  job.mutable_spec()->add_argv("--epochs");
  job.mutable_spec()->add_argv("90");
  (*job.mutable_spec()->mutable_env())["SEED"] = "3";
  job.set_state(v1::RUNNING);
  job.set_generation(3);
  job.set_size(2);
  job.set_min_np(2);
  job.set_max_np(4);
  job.set_resets(2);
  job.set_last_commit(120);
  job.set_created_unix(kCreated);
  job.set_started_unix(kCreated + 1);
  // Listed out of rank order, with a worker that left.
  auto* w1 = job.add_workers();
  w1->set_worker_id(3);
  w1->set_rank(1);
  w1->set_host("127.0.0.1");
  w1->set_pid(4003);
  w1->set_state(v1::WORKER_RUNNING);
  auto* gone = job.add_workers();
  gone->set_worker_id(2);
  gone->set_rank(-1);
  gone->set_host("127.0.0.1");
  gone->set_pid(4002);
  gone->set_state(v1::WORKER_REMOVED);
  auto* w0 = job.add_workers();
  w0->set_worker_id(1);
  w0->set_rank(0);
  w0->set_host("localhost");
  w0->set_pid(4001);
  w0->set_state(v1::WORKER_RUNNING);
  w0->set_resets(2);
  auto* h = job.add_hosts();
  h->set_host("localhost");
  h->set_slots(2);
  h->set_state("usable");
  auto* cool = job.add_hosts();
  cool->set_host("node9");
  cool->set_slots(4);
  cool->set_state("cooldown");
  cool->set_cooldown_seconds_left(75);
  auto* reset = job.add_reset_history();
  reset->set_generation(3);
  reset->set_cause("host node9 drained");
  reset->set_detected_unix(kCreated + 10);
  reset->set_ready_unix(kCreated + 10.022);
  reset->set_resumed_unix(kCreated + 10.150);
  return job;
}

// The lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  for (auto line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) out.emplace_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("a text table aligns its columns and pads short rows") {
  cli::TextTable table({"ID", "STATE", "NOTE"});
  table.AddRow({"job-1", "RUNNING", "x"});
  table.AddRow({"job-100", "SUCCEEDED"});
  CHECK(table.Render() ==
        "ID       STATE      NOTE\n"
        "job-1    RUNNING    x\n"
        "job-100  SUCCEEDED\n");
}

TEST_CASE("durations are shown with their two biggest units") {
  CHECK(cli::HumanDuration(absl::Milliseconds(850)) == "850ms");
  CHECK(cli::HumanDuration(absl::Seconds(42)) == "42s");
  CHECK(cli::HumanDuration(absl::Seconds(185)) == "3m05s");
  CHECK(cli::HumanDuration(absl::Minutes(127)) == "2h07m");
  CHECK(cli::HumanDuration(absl::Hours(76)) == "3d04h");
  CHECK(cli::HumanDuration(-absl::Seconds(3)) == "0ms");
  CHECK(cli::Latency(0.0224) == "0.022 s");
}

TEST_CASE("JSON keeps proto field names, prints every field and 64-bit numbers as numbers") {
  const std::string json = MessageToJson(RunningJob());
  CHECK(absl::StrContains(json, "\"job_id\": \"job-7\""));
  CHECK(absl::StrContains(json, "\"generation\": 3,"));  // int64, unquoted
  CHECK(absl::StrContains(json, "\"state\": \"RUNNING\""));
  CHECK(absl::StrContains(json, "\"rank\": 0,"));  // a default value is still there
  CHECK(absl::StrContains(json, "\"reason\": \"\""));
  CHECK(absl::StrContains(json, "\"worker_state\"") == false);
  CHECK(absl::StrContains(json, "\"state\": \"WORKER_REMOVED\""));
  CHECK(absl::StrContains(json, "\"env\": {\n"));
  CHECK(absl::StrContains(json, "\"SEED\": \"3\""));
  CHECK(absl::StrContains(json, "\"argv\": [\n"));
  CHECK(absl::StrContains(json, "\"ready_unix\": 1704164655.022"));
  CHECK(absl::StrContains(json, "\"cooldown_seconds_left\": 75"));
  CHECK(absl::StrContains(json, "\"recent_events\": []"));
}

TEST_CASE("JSON strings are escaped and compact style is one line") {
  v1::JobEvent event;
  event.set_kind(v1::JobEvent::OUTPUT);
  event.set_message("say \"hi\"\\\tnow\x01");
  event.set_seq(18446744073709551615ull);
  const std::string json = MessageToJson(event, JsonStyle{0});
  CHECK(json.find('\n') == std::string::npos);
  CHECK(absl::StrContains(json, R"("message":"say \"hi\"\\\tnow\u0001")"));
  CHECK(absl::StrContains(json, "\"seq\":18446744073709551615,"));
  CHECK(absl::StrContains(json, "\"kind\":\"OUTPUT\""));
  CHECK(JsonNumber(0.1) == "0.1");
  CHECK(JsonNumber(std::nan("")) == "\"NaN\"");
}

TEST_CASE("list shows one row per job with its size bounds, age and command") {
  v1::JobStatus ended = RunningJob();
  ended.set_job_id("job-8");
  ended.set_state(v1::SUCCEEDED);
  ended.set_max_np(0);
  ended.mutable_spec()->add_argv(std::string(80, 'x'));
  const std::string table =
      cli::FormatJobTable({RunningJob(), ended}, absl::FromUnixSeconds(kCreated + 185));
  auto lines = absl::StrSplit(table, '\n');
  std::vector<std::string> rows(lines.begin(), lines.end());
  REQUIRE(rows.size() == 4);  // header, two jobs, the final newline
  CHECK(absl::StartsWith(rows[0], "ID     STATE      GENERATION  SIZE  MIN/MAX  RESETS  AGE"));
  CHECK(rows[1] ==
        "job-7  RUNNING    3           2     2/4      2       3m05s  /opt/train --epochs 90");
  CHECK(absl::StrContains(rows[2], "SUCCEEDED"));
  CHECK(absl::StrContains(rows[2], " 2/-  "));
  CHECK(absl::EndsWith(rows[2], "..."));
  CHECK(cli::FormatJobTable({}, absl::Now()) == "No jobs.\n");
}

TEST_CASE("status lists members by rank, hosts with cooldown, and resets as latencies") {
  v1::JobStatus job = RunningJob();
  auto* event = job.add_recent_events();
  event->set_kind(v1::JobEvent::MEMBERSHIP);
  event->set_time_unix(kCreated + 10.022);
  event->set_message("generation 3 ready: size 2");
  const std::string text = cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated + 60), kUtc);
  CHECK(absl::StrContains(text, "State:        RUNNING\n"));
  CHECK(absl::StrContains(text, "Size:         2 (min 2, max 4)\n"));
  CHECK(absl::StrContains(text, "Created:      2024-01-02 03:04:05 (1m00s ago)\n"));
  CHECK_FALSE(absl::StrContains(text, "Ended:"));
  // Rank 0, rank 1, then the worker that left.
  const size_t rank0 = text.find("4001"), rank1 = text.find("4003"), left = text.find("4002");
  REQUIRE(rank0 != std::string::npos);
  CHECK(rank0 < rank1);
  CHECK(rank1 < left);
  CHECK(LinesWith(text, "4002").front() ==
        "-     2       127.0.0.1  4002  REMOVED  0     0       0");
  CHECK(LinesWith(text, "node9").front() == "node9      4      cooldown  1m15s");
  CHECK(LinesWith(text, "drained").front() ==
        "3           03:04:15.000  0.022 s   0.150 s     host node9 drained");
  CHECK(LinesWith(text, "membership").front() ==
        "03:04:15.022  membership  generation 3 ready: size 2");
}

TEST_CASE("status counts the hot spares and lists each with its host and state") {
  v1::JobStatus job = RunningJob();
  CHECK_FALSE(absl::StrContains(cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated), kUtc),
                                "Hot spares"));
  job.mutable_spec()->set_hot_spares(2);
  auto* spare = job.add_workers();
  spare->set_worker_id(7);
  spare->set_rank(-1);
  spare->set_host("node8");
  spare->set_pid(4007);
  spare->set_state(v1::WORKER_SPARE_READY);
  const std::string text = cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated), kUtc);
  CHECK(absl::StrContains(text, "Hot spares:   1 ready, 0 starting (of 2; in Workers, RANK -)\n"));
  CHECK(LinesWith(text, "4007").front() ==
        "-     7       node8      4007  SPARE_READY  -     0       0");
}

TEST_CASE("hosts lists the hosts of running jobs only") {
  v1::JobStatus ended = RunningJob();
  ended.set_job_id("job-1");
  ended.set_state(v1::CANCELLED);
  auto rows = cli::HostsOfRunningJobs({RunningJob(), ended});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].host == "localhost");
  CHECK(rows[1].host == "node9");
  CHECK(rows[1].job_id == "job-7");
  const std::string table = cli::FormatHostTable(rows);
  CHECK(absl::StrContains(table, "node9      job-7  4      cooldown  1m15s\n"));
  const std::string json = cli::HostRowsToJson(rows);
  CHECK(absl::StrContains(json, R"({"host": "node9", "job_id": "job-7", "slots": 4, )"
                                R"("state": "cooldown", "cooldown_seconds_left": 75})"));
  CHECK(cli::HostRowsToJson({}) == "{\n  \"hosts\": []\n}");
}

TEST_CASE("watch prints membership with its reset latency and hides what it was not asked for") {
  v1::JobEvent membership;
  membership.set_kind(v1::JobEvent::MEMBERSHIP);
  membership.set_time_unix(kCreated);
  membership.set_generation(3);
  membership.set_size(3);
  membership.set_reset_seconds(0.0224);
  CHECK(cli::FormatWatchLine(membership, {}, kUtc) ==
        "03:04:05.000  membership  generation 3 ready: size 3, reset 0.022 s");
  membership.set_reset_seconds(0);
  CHECK(*cli::FormatWatchLine(membership, {}, kUtc) ==
        "03:04:05.000  membership  generation 3 ready: size 3");

  v1::JobEvent ended;
  ended.set_kind(v1::JobEvent::JOB_ENDED);
  ended.set_time_unix(kCreated);
  ended.set_state(v1::CANCELLED);
  ended.set_message("cancelled by alice");
  CHECK(*cli::FormatWatchLine(ended, {}, kUtc) ==
        "03:04:05.000  ended       job ended CANCELLED: cancelled by alice");

  v1::JobEvent output;
  output.set_kind(v1::JobEvent::OUTPUT);
  output.set_rank(2);
  output.set_stream("stderr");
  output.set_message("loss 0.5");
  v1::JobEvent info;
  info.set_kind(v1::JobEvent::INFO);
  info.set_message("started worker 4");
  CHECK_FALSE(cli::FormatWatchLine(output, {}, kUtc).has_value());
  CHECK_FALSE(cli::FormatWatchLine(info, {}, kUtc).has_value());
  WatchFilter all;
  all.info = all.output_lines = true;
  CHECK(*cli::FormatWatchLine(output, all, kUtc) == "[2]<stderr>:loss 0.5");
  CHECK(absl::EndsWith(*cli::FormatWatchLine(info, all, kUtc), "info        started worker 4"));
}

TEST_CASE("status shows what each rank reports doing once some rank reports it") {
  v1::JobStatus job = RunningJob();
  std::string text = cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated + 60), kUtc);
  CHECK_FALSE(absl::StrContains(text, "WAITS IN"));  // no reports: the table as before
  v1::WorkerActivity* waits = job.mutable_workers(0)->mutable_activity();
  waits->mutable_waiting()->set_name("grad.late");
  waits->mutable_waiting()->set_operation("allreduce");
  waits->mutable_waiting()->set_waited_seconds(7);
  waits->set_completed(12);
  waits->set_step_seconds(0.25);
  job.mutable_workers(1)->mutable_activity()->set_completed(13);
  text = cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated + 60), kUtc);
  CHECK(absl::StrContains(text, "DONE"));
  CHECK(absl::StrContains(text, "WAITS IN"));
  const std::string waiting = LinesWith(text, std::to_string(job.workers(0).pid())).front();
  CHECK_THAT(waiting, Catch::Contains("12  "));
  CHECK_THAT(waiting, Catch::Contains("0.25s"));
  CHECK_THAT(waiting, Catch::Contains("allreduce grad.late ("));
  CHECK_THAT(LinesWith(text, std::to_string(job.workers(1).pid())).front(), Catch::EndsWith("-"));
}

TEST_CASE("status names a stalled link by its two ends, the waiting one first") {
  v1::JobStatus job = RunningJob();
  v1::StallReport* stall = job.mutable_stall();
  stall->set_kind("link");
  stall->mutable_collective()->set_name("grad");
  stall->mutable_collective()->set_operation("allreduce");
  stall->add_waiting_ranks(0);
  stall->add_waiting_ranks(1);
  v1::StallCulprit* sender = stall->add_culprits();
  sender->set_rank(0);
  sender->set_host("hosta");
  sender->set_pid(41);
  sender->set_peer(1);
  sender->set_awaited(true);
  v1::StallCulprit* waiter = stall->add_culprits();
  waiter->set_rank(1);
  waiter->set_host("hostb");
  waiter->set_pid(42);
  waiter->set_peer(0);
  const std::string text = cli::FormatJobDetails(job, absl::FromUnixSeconds(kCreated + 60), kUtc);
  CHECK_THAT(text, Catch::Contains("culprits at the ends of a stalled link"));
  CHECK_THAT(text, Catch::Contains("  link between rank 1 (hostb, pid 42) and rank 0 (hosta, pid "
                                   "41) stalled: rank 1 waits for rank 0's data\n"));
}

TEST_CASE("list and status show the goodput and its parts once the daemon reports them") {
  v1::JobStatus job = RunningJob();
  const absl::Time now = absl::FromUnixSeconds(kCreated + 60);
  CHECK_FALSE(absl::StrContains(cli::FormatJobTable({job}, now), "GOODPUT"));
  CHECK_FALSE(absl::StrContains(cli::FormatJobDetails(job, now, kUtc), "Goodput"));
  v1::JobGoodput* g = job.mutable_goodput();
  g->set_wall_seconds(200);
  g->set_training_seconds(190);
  g->set_goodput(0.95);
  g->set_starting_seconds(4);
  g->set_detection_seconds(0.5);
  g->set_reset_seconds(3);
  g->set_replay_seconds(3);
  const std::string table = cli::FormatJobTable({job}, now);
  CHECK(absl::StrContains(table, "AGE    GOODPUT  COMMAND"));
  CHECK(absl::StrContains(table, "1m00s  95.0%    /opt/train"));
  const std::string text = cli::FormatJobDetails(job, now, kUtc);
  CHECK(absl::StrContains(text, "Goodput:      95.0% (training 3m10s of 3m20s)\n"));
  CHECK(absl::StrContains(text, "\nTime:\nPART       SECONDS  SHARE\n"));
  CHECK(LinesWith(text, "training ").back() == "training   190.000  95.0%");
  CHECK(LinesWith(text, "replay").front() == "replay     3.000    1.5%");
  CHECK(LinesWith(text, "stall").front() == "stall      0.000    0.0%");
}
