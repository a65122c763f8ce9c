// The daemon's metrics: counted from job events and RPCs, rendered in the
// Prometheus text format, and served over HTTP by ServeMetrics.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/metrics/metrics.h"
#include "daemon/metrics/metrics_http.h"
#include "http_exchange.h"

using horovodd::daemon::HttpServer;
using horovodd::daemon::Metrics;
using horovodd::daemon::ServeMetrics;
namespace v1 = horovodd::v1;

namespace {

v1::JobEvent Event(v1::JobEvent::Kind kind) {
  v1::JobEvent e;
  e.set_kind(kind);
  return e;
}

v1::JobEvent State(v1::JobState state) {
  v1::JobEvent e = Event(v1::JobEvent::STATE);
  e.set_state(state);
  return e;
}

v1::JobEvent Membership(int size, double reset_seconds) {
  v1::JobEvent e = Event(v1::JobEvent::MEMBERSHIP);
  e.set_size(size);
  e.set_reset_seconds(reset_seconds);
  return e;
}

v1::JobEvent Coded(v1::JobEvent::Kind kind, const std::string& code) {
  v1::JobEvent e = Event(kind);
  e.set_code(code);
  return e;
}

// The value of the sample line that starts with `series` ("name{labels}").
double Sample(const std::string& page, const std::string& series) {
  const std::string prefix = series + " ";
  size_t at = page.find("\n" + prefix);
  REQUIRE(at != std::string::npos);
  at += 1 + prefix.size();
  double value = 0;
  REQUIRE(absl::SimpleAtod(page.substr(at, page.find('\n', at) - at), &value));
  return value;
}

}  // namespace

TEST_CASE("a fresh daemon shows every metric at zero") {
  Metrics metrics;
  const std::string page = metrics.Render();
  for (const char* state :
       {"pending", "running", "resetting", "succeeded", "failed", "cancelled"}) {
    CHECK(Sample(page, absl::StrCat("horovodd_jobs{state=\"", state, "\"}")) == 0);
  }
  CHECK(Sample(page, "horovodd_workers") == 0);
  CHECK(Sample(page, "horovodd_resets_total") == 0);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_count") == 0);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"+Inf\"}") == 0);
  CHECK(Sample(page, "horovodd_discovery_failures_total") == 0);
  CHECK(Sample(page, "horovodd_worker_failures_total") == 0);
  CHECK(absl::StrContains(page, "# TYPE horovodd_reset_latency_seconds histogram\n"));
  CHECK(absl::StrContains(page, "# TYPE horovodd_rpc_requests_total counter\n"));
}

TEST_CASE("job events move jobs between states and count workers, resets and failures") {
  Metrics metrics;
  metrics.OnJobSubmitted("job-1", v1::JobSpec(), absl::Now(), "");
  metrics.OnJobSubmitted("job-2", v1::JobSpec(), absl::Now(), "");
  CHECK(Sample(metrics.Render(), "horovodd_jobs{state=\"pending\"}") == 2);

  metrics.OnJobEvent("job-1", State(v1::RUNNING));
  metrics.OnJobEvent("job-1", Membership(3, 0));
  metrics.OnJobEvent("job-1", Event(v1::JobEvent::OUTPUT));
  std::string page = metrics.Render();
  CHECK(Sample(page, "horovodd_jobs{state=\"pending\"}") == 1);
  CHECK(Sample(page, "horovodd_jobs{state=\"running\"}") == 1);
  CHECK(Sample(page, "horovodd_workers") == 3);
  // The first generation is no reset: no latency sample.
  CHECK(Sample(page, "horovodd_reset_latency_seconds_count") == 0);

  // A worker fails; the job resets to 2 workers in 0.3 s.
  metrics.OnJobEvent("job-1", Coded(v1::JobEvent::WARNING, "worker_failed"));
  metrics.OnJobEvent("job-1", State(v1::RESETTING));
  metrics.OnJobEvent("job-1", State(v1::RUNNING));
  metrics.OnJobEvent("job-1", Membership(2, 0.3));
  // Another is lost; the next reset takes 7 s.
  metrics.OnJobEvent("job-1", Coded(v1::JobEvent::WARNING, "worker_lost"));
  metrics.OnJobEvent("job-1", State(v1::RESETTING));
  metrics.OnJobEvent("job-1", State(v1::RUNNING));
  metrics.OnJobEvent("job-1", Membership(1, 7));
  metrics.OnJobEvent("job-2", Coded(v1::JobEvent::WARNING, "discovery_failed"));
  page = metrics.Render();
  CHECK(Sample(page, "horovodd_workers") == 1);
  CHECK(Sample(page, "horovodd_resets_total") == 2);
  CHECK(Sample(page, "horovodd_worker_failures_total") == 2);
  CHECK(Sample(page, "horovodd_discovery_failures_total") == 1);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"0.25\"}") == 0);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"0.5\"}") == 1);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"5\"}") == 1);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"10\"}") == 2);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_bucket{le=\"+Inf\"}") == 2);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_count") == 2);
  CHECK(Sample(page, "horovodd_reset_latency_seconds_sum") == Approx(7.3));

  v1::JobEvent ended = Event(v1::JobEvent::JOB_ENDED);
  ended.set_state(v1::FAILED);
  metrics.OnJobEvent("job-1", ended);
  page = metrics.Render();
  CHECK(Sample(page, "horovodd_jobs{state=\"failed\"}") == 1);
  CHECK(Sample(page, "horovodd_jobs{state=\"running\"}") == 0);
  CHECK(Sample(page, "horovodd_workers") == 0);
}

TEST_CASE("hot spares: swaps are counted from events, ready spares per job from its status") {
  Metrics metrics;
  CHECK(Sample(metrics.Render(), "horovodd_spare_swaps_total") == 0);
  metrics.OnJobEvent("job-1", Coded(v1::JobEvent::INFO, "spare_swapped"));
  CHECK(Sample(metrics.Render(), "horovodd_spare_swaps_total") == 1);

  v1::JobStatus with_spares;
  with_spares.set_job_id("job-1");
  with_spares.set_state(v1::RUNNING);
  with_spares.mutable_spec()->set_hot_spares(2);
  with_spares.add_workers()->set_state(v1::WORKER_RUNNING);
  with_spares.add_workers()->set_state(v1::WORKER_SPARE_READY);
  with_spares.add_workers()->set_state(v1::WORKER_SPARE_STARTING);
  v1::JobStatus without = with_spares;
  without.set_job_id("job-2");
  without.mutable_spec()->set_hot_spares(0);
  const std::string page = Metrics::RenderSpares({with_spares, without});
  CHECK(absl::StrContains(page, "# TYPE horovodd_spares_ready gauge\n"));
  CHECK(Sample(page, "horovodd_spares_ready{job=\"job-1\"}") == 1);
  CHECK_FALSE(absl::StrContains(page, "job-2"));
}

TEST_CASE("jobs recovered from the journal count in their recorded state") {
  Metrics metrics;
  metrics.AddRecoveredJob("job-1", v1::SUCCEEDED);
  metrics.AddRecoveredJob("job-2", v1::FAILED);
  metrics.AddRecoveredJob("job-3", v1::FAILED);
  const std::string page = metrics.Render();
  CHECK(Sample(page, "horovodd_jobs{state=\"succeeded\"}") == 1);
  CHECK(Sample(page, "horovodd_jobs{state=\"failed\"}") == 2);
}

TEST_CASE("RPCs are counted by method, with a bounded number of labels") {
  Metrics metrics;
  metrics.CountRpc("/horovodd.v1.JobService/SubmitJob");
  metrics.CountRpc("/horovodd.v1.JobService/SubmitJob");
  metrics.CountRpc("/horovodd.v1.WorkerService/Rendezvous");
  std::string page = metrics.Render();
  CHECK(Sample(page, "horovodd_rpc_requests_total{method=\"horovodd.v1.JobService/SubmitJob\"}") ==
        2);
  CHECK(Sample(page,
               "horovodd_rpc_requests_total{method=\"horovodd.v1.WorkerService/Rendezvous\"}") ==
        1);

  // Made-up method names cannot grow the page without bound; quotes are escaped.
  for (size_t i = 0; i < 2 * Metrics::kMaxRpcMethods; ++i) {
    metrics.CountRpc(absl::StrCat("/made.up/\"Method", i));
  }
  page = metrics.Render();
  size_t lines = 0;
  for (size_t at = page.find("\nhorovodd_rpc_requests_total{"); at != std::string::npos;
       at = page.find("\nhorovodd_rpc_requests_total{", at + 1)) {
    ++lines;
  }
  CHECK(lines == Metrics::kMaxRpcMethods + 1);
  CHECK(Sample(page, "horovodd_rpc_requests_total{method=\"other\"}") ==
        Metrics::kMaxRpcMethods + 2);
  CHECK(absl::StrContains(page, "{method=\"made.up/\\\"Method0\"}"));
  // Known methods keep counting under their own name.
  metrics.CountRpc("/horovodd.v1.JobService/SubmitJob");
  CHECK(Sample(metrics.Render(),
               "horovodd_rpc_requests_total{method=\"horovodd.v1.JobService/SubmitJob\"}") == 3);
}

TEST_CASE("each running job's goodput and the seconds of each part are gauges") {
  CHECK(Metrics::RenderGoodput({}) ==
        "# HELP horovodd_job_seconds " +
            std::string(
                "Where each job's wall time went, by part: training (on work that was kept), "
                "starting, waiting (for --min-np slots), detection, reset, replay (work a failure "
                "lost) and stall; the parts add up to its wall time.\n") +
            "# TYPE horovodd_job_seconds gauge\n"
            "# HELP horovodd_job_goodput Each job's share of its wall time spent training on "
            "work that was kept.\n# TYPE horovodd_job_goodput gauge\n");
  v1::JobStatus running;
  running.set_job_id("job-\"1");
  running.set_state(v1::RUNNING);
  running.mutable_goodput()->set_wall_seconds(100);
  running.mutable_goodput()->set_training_seconds(96);
  running.mutable_goodput()->set_replay_seconds(4);
  running.mutable_goodput()->set_goodput(0.96);
  v1::JobStatus ended = running;
  ended.set_job_id("job-2");
  ended.set_state(v1::SUCCEEDED);
  const std::string page = Metrics::RenderGoodput({running, ended});
  CHECK(Sample(page, "horovodd_job_seconds{job=\"job-\\\"1\",part=\"training\"}") == 96);
  CHECK(Sample(page, "horovodd_job_seconds{job=\"job-\\\"1\",part=\"replay\"}") == 4);
  CHECK(Sample(page, "horovodd_job_seconds{job=\"job-\\\"1\",part=\"stall\"}") == 0);
  CHECK(Sample(page, "horovodd_job_goodput{job=\"job-\\\"1\"}") == 0.96);
  CHECK_FALSE(absl::StrContains(page, "job-2"));  // ended: no longer exported
}

TEST_CASE("each rank of a running job has its activity as gauges") {
  v1::JobStatus job;
  job.set_job_id("job-1");
  job.set_state(v1::RUNNING);
  v1::WorkerStatus& waiting = *job.add_workers();
  waiting.set_rank(0);
  waiting.mutable_activity()->mutable_waiting()->set_waited_seconds(2.5);
  waiting.mutable_activity()->set_step_seconds(0.5);
  waiting.mutable_activity()->set_step_wait_seconds(0.125);
  waiting.mutable_activity()->set_completed(12);
  waiting.mutable_activity()->set_last_commit(12345678901);
  v1::WorkerStatus& slow = *job.add_workers();
  slow.set_rank(1);
  slow.mutable_activity()->set_step_seconds(0.5);
  slow.set_lost_seconds_per_step(0.375);
  slow.set_straggler(true);
  job.add_workers()->set_rank(2);  // nothing reported yet
  v1::WorkerStatus& spare = *job.add_workers();
  spare.set_rank(-1);
  spare.mutable_activity()->set_completed(1);
  v1::JobStatus ended = job;
  ended.set_job_id("job-2");
  ended.set_state(v1::FAILED);

  const std::string page = Metrics::RenderRanks({job, ended});
  const std::string zero = "{job=\"job-1\",rank=\"0\"}";
  const std::string one = "{job=\"job-1\",rank=\"1\"}";
  CHECK(absl::StrContains(page, "# TYPE horovodd_rank_wait_seconds gauge\n"));
  CHECK(Sample(page, "horovodd_rank_wait_seconds" + zero) == 2.5);
  CHECK(Sample(page, "horovodd_rank_wait_seconds" + one) == 0);  // in no collective
  CHECK(Sample(page, "horovodd_rank_step_seconds" + zero) == 0.5);
  CHECK(Sample(page, "horovodd_rank_collectives_completed" + zero) == 12);
  // Counts are whole numbers, however large.
  CHECK(absl::StrContains(page, "horovodd_rank_last_commit" + zero + " 12345678901\n"));
  CHECK(Sample(page, "horovodd_rank_step_wait_seconds" + zero) == 0.125);
  CHECK(Sample(page, "horovodd_rank_lost_seconds_per_step" + one) == 0.375);
  CHECK(Sample(page, "horovodd_rank_straggler" + zero) == 0);
  CHECK(Sample(page, "horovodd_rank_straggler" + one) == 1);
  // Ranks that reported nothing, spares and ended jobs have no samples.
  CHECK_FALSE(absl::StrContains(page, "rank=\"2\""));
  CHECK_FALSE(absl::StrContains(page, "rank=\"-1\""));
  CHECK_FALSE(absl::StrContains(page, "job-2"));
  // Every metric once, each with its help and type, in a stable order.
  size_t at = 0;
  for (const char* name : {"horovodd_rank_wait_seconds", "horovodd_rank_step_seconds",
                           "horovodd_rank_collectives_completed", "horovodd_rank_last_commit",
                           "horovodd_rank_step_wait_seconds", "horovodd_rank_lost_seconds_per_step",
                           "horovodd_rank_straggler"}) {
    const size_t help = page.find(absl::StrCat("# HELP ", name, " "), at);
    REQUIRE(help != std::string::npos);
    at = help + 1;
  }
}

TEST_CASE("the HTTP server answers GET /metrics with the rendered page") {
  int renders = 0;
  auto server = ServeMetrics("127.0.0.1:0", [&renders] {
    ++renders;
    return absl::StrCat("horovodd_workers ", renders, "\n");
  });
  REQUIRE(server.ok());
  const std::string address = (*server)->address();
  CHECK(absl::StartsWith(address, "127.0.0.1:"));

  const std::string first = horovodd::test::HttpExchange(
      address, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
  CHECK(absl::StartsWith(first, "HTTP/1.1 200 OK\r\n"));
  CHECK(absl::StrContains(first, "Content-Type: text/plain; version=0.0.4"));
  CHECK(absl::StrContains(first, "Content-Length: 19\r\n"));
  CHECK(absl::EndsWith(first, "\r\n\r\nhorovodd_workers 1\n"));
  // Each scrape renders afresh; a query string is ignored.
  CHECK(absl::EndsWith(horovodd::test::HttpExchange(address, "GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
                       "\r\n\r\nhorovodd_workers 2\n"));
}

TEST_CASE("the HTTP server refuses other paths, methods and oversized requests") {
  auto server = ServeMetrics("127.0.0.1:0", [] { return std::string("page\n"); });
  REQUIRE(server.ok());
  const std::string address = (*server)->address();

  CHECK(absl::StartsWith(horovodd::test::HttpExchange(address, "GET / HTTP/1.1\r\n\r\n"),
                         "HTTP/1.1 404 Not Found"));
  CHECK(absl::StartsWith(horovodd::test::HttpExchange(address, "GET /metricsx HTTP/1.1\r\n\r\n"),
                         "HTTP/1.1 404 Not Found"));
  CHECK(absl::StartsWith(horovodd::test::HttpExchange(address, "POST /metrics HTTP/1.1\r\n\r\n"),
                         "HTTP/1.1 405 Method Not Allowed"));
  CHECK(absl::StartsWith(horovodd::test::HttpExchange(address, "nonsense\r\n\r\n"),
                         "HTTP/1.1 400 Bad Request"));
  const std::string head = horovodd::test::HttpExchange(address, "HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(absl::StartsWith(head, "HTTP/1.1 200 OK"));
  CHECK(absl::StrContains(head, "Content-Length: 5\r\n"));
  CHECK(absl::EndsWith(head, "\r\n\r\n"));

  const std::string huge =
      "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(HttpServer::kMaxRequestBytes, 'x');
  CHECK(absl::StartsWith(horovodd::test::HttpExchange(address, huge),
                         "HTTP/1.1 431 Request Header Fields Too Large"));
  // It still serves afterwards.
  CHECK(absl::EndsWith(horovodd::test::HttpExchange(address, "GET /metrics HTTP/1.1\r\n\r\n"),
                       "\r\n\r\npage\n"));
}

TEST_CASE("a client that connects and says nothing does not block the others") {
  auto server = ServeMetrics("127.0.0.1:0", [] { return std::string("page\n"); });
  REQUIRE(server.ok());
  const std::string address = (*server)->address();
  int port = 0;
  REQUIRE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(idle, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  CHECK(absl::EndsWith(horovodd::test::HttpExchange(address, "GET /metrics HTTP/1.1\r\n\r\n"),
                       "\r\n\r\npage\n"));
  close(idle);
}

TEST_CASE("a metrics address that cannot be bound is an error naming it") {
  auto first = ServeMetrics("127.0.0.1:0", [] { return std::string(); });
  REQUIRE(first.ok());
  auto second = ServeMetrics((*first)->address(), [] { return std::string(); });
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(second.status().message() ==
        absl::StrCat("cannot serve metrics on ", (*first)->address(), ": Address already in use"));
}
