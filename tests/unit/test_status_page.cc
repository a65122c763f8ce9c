// The status page without a browser or a daemon: its route table, who may
// take each route (no token, the viewer token, the admin token, the loopback
// rule, a rebound DNS name), the JSON it serves, and the live feed, over a
// fake of the daemon's jobs.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/status_page/page_assets.h"
#include "daemon/status_page/page_json.h"
#include "daemon/status_page/page_routes.h"
#include "daemon/status_page/page_stream.h"
#include "daemon/status_page/status_page.h"
#include "message_json/message_json.h"
#include "temp_dir.h"

using namespace horovodd::daemon;
namespace v1 = horovodd::v1;

namespace {

v1::JobStatus RunningJob(const std::string& id) {
  v1::JobStatus job;
  job.set_job_id(id);
  job.set_state(v1::RUNNING);
  job.set_size(2);
  job.set_generation(3);
  job.set_resets(2);
  job.set_min_np(1);
  job.set_max_np(4);
  job.mutable_spec()->set_name("train");
  job.mutable_spec()->add_argv("./train");
  (*job.mutable_spec()->mutable_env())["SECRET"] = "s3cr3t";
  auto* worker = job.add_workers();
  worker->set_worker_id(7);
  worker->set_rank(0);
  worker->set_host("node-1");
  worker->set_pid(4242);
  worker->set_state(v1::WORKER_RUNNING);
  auto* host = job.add_hosts();
  host->set_host("node-2");
  host->set_state("cooldown");
  host->set_cooldown_seconds_left(12.5);
  auto* reset = job.add_reset_history();
  reset->set_generation(3);
  reset->set_cause("worker failed");
  return job;
}

v1::JobEvent Event(uint64_t seq, v1::JobEvent::Kind kind, const std::string& message) {
  v1::JobEvent event;
  event.set_seq(seq);
  event.set_kind(kind);
  event.set_message(message);
  return event;
}

// The daemon's jobs, as the test sets them; records what the page asked.
class FakeJobs final : public PageJobs {
 public:
  std::vector<v1::JobStatus> jobs;
  std::vector<v1::JobEvent> events;
  bool log_closed = false;
  std::vector<std::string> cancelled;
  std::vector<std::string> drained;  // "host job drained|undrained"
  int event_reads = 0;

  std::vector<v1::JobStatus> List() override { return jobs; }
  absl::StatusOr<v1::JobStatus> Get(const std::string& id) override {
    for (const auto& job : jobs) {
      if (job.job_id() == id) return job;
    }
    return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
  }
  absl::StatusOr<EventReader> Events(const std::string& id) override {
    if (!Get(id).ok()) return Get(id).status();
    return EventReader([this](uint64_t from, absl::Time) {
      ++event_reads;
      EventLog::Batch batch;
      batch.next_seq = from;
      for (const auto& event : events) {
        if (event.seq() < from) continue;
        batch.events.push_back(event);
        batch.next_seq = event.seq() + 1;
      }
      batch.closed = log_closed;
      return batch;
    });
  }
  absl::Status Cancel(const std::string& id, const std::string& reason) override {
    if (!Get(id).ok()) return Get(id).status();
    cancelled.push_back(absl::StrCat(id, ": ", reason));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                      const std::string& job, bool on) override {
    drained.push_back(absl::StrCat(host, " ", job, " ", on ? "drained" : "undrained"));
    return std::vector<std::string>{job.empty() ? "job-1" : job};
  }
};

// A daemon's access rules with an admin and a viewer token.
struct Tokens {
  hvdd_test::TempDir dir{"hvdd-page"};
  std::unique_ptr<AccessPolicy> policy;

  explicit Tokens(ReadOnlyAccess open = ReadOnlyAccess::kTokenRequired) {
    AuthSettings settings;
    settings.admin_token_file = Write("admin.token", "admin-secret");
    settings.viewer_token_file = Write("viewer.token", "viewer-secret");
    settings.open_read_only = open;
    auto created = AccessPolicy::Create(settings, "");
    REQUIRE(created.ok());
    policy = std::move(*created);
  }
  std::string Write(const std::string& name, const std::string& token) {
    const std::string path = (dir.path() / name).string();
    std::ofstream(path) << token << "\n";
    REQUIRE(chmod(path.c_str(), 0600) == 0);
    return path;
  }
};

HttpRequest Request(const std::string& method, const std::string& target,
                    const std::string& token = "", const std::string& peer = "ipv4:10.0.0.9:1") {
  absl::StatusOr<HttpRequest> request =
      ParseRequestHead(absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: daemon:9000"));
  REQUIRE(request.ok());
  request->peer = peer;
  if (!token.empty()) request->headers["authorization"] = "Bearer " + token;
  return *request;
}

// Collects what a stream writes; Wait says false after `waits` calls.
class RecordingStream final : public HttpStream {
 public:
  explicit RecordingStream(int waits) : waits_left_(waits) {}
  bool Write(absl::string_view bytes) override {
    written.append(bytes.data(), bytes.size());
    return true;
  }
  bool Wait(absl::Duration) override { return waits_left_-- > 0; }
  // The names of the events written, in order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (absl::string_view line : absl::StrSplit(written, '\n')) {
      if (absl::ConsumePrefix(&line, "event: ")) names.emplace_back(line);
    }
    return names;
  }
  std::string written;

 private:
  int waits_left_;
};

}  // namespace

TEST_CASE("the route table: every route, its access, and 404 or 405 for the rest") {
  struct Case {
    const char* method;
    const char* path;
    PageAction action;
    std::optional<Access> access;
  };
  for (const Case& c : {
           Case{"GET", "/", PageAction::kAsset, std::nullopt},
           Case{"GET", "/app.js", PageAction::kAsset, std::nullopt},
           Case{"HEAD", "/app.css", PageAction::kAsset, std::nullopt},
           Case{"GET", "/api/session", PageAction::kSession, Access::kRead},
           Case{"GET", "/api/jobs", PageAction::kListJobs, Access::kRead},
           Case{"GET", "/api/jobs/job-1", PageAction::kGetJob, Access::kRead},
           Case{"GET", "/api/stream", PageAction::kStream, Access::kRead},
           Case{"POST", "/api/jobs/job-1/cancel", PageAction::kCancelJob, Access::kAdmin},
           Case{"POST", "/api/hosts/node-1/drain", PageAction::kDrainHost, Access::kAdmin},
           Case{"POST", "/api/hosts/node-1/undrain", PageAction::kUndrainHost, Access::kAdmin},
       }) {
    INFO(c.method << " " << c.path);
    auto route = ResolvePageRoute(c.method, c.path);
    REQUIRE(route.ok());
    CHECK(route->action == c.action);
    CHECK(route->access == c.access);
  }
  auto cancel = ResolvePageRoute("POST", "/api/jobs/job-7/cancel");
  CHECK(cancel->job_id == "job-7");
  CHECK(cancel->name == "POST /api/jobs/{job}/cancel");
  CHECK(ResolvePageRoute("POST", "/api/hosts/10.0.0.5/drain")->host == "10.0.0.5");
  CHECK(ResolvePageRoute("GET", "/index.html")->asset == "index.html");

  CHECK(ResolvePageRoute("GET", "/api/nope").status().code() == absl::StatusCode::kNotFound);
  CHECK(ResolvePageRoute("GET", "/api/jobs//cancel").status().code() ==
        absl::StatusCode::kNotFound);
  auto wrong = ResolvePageRoute("GET", "/api/jobs/job-1/cancel");
  CHECK(wrong.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(wrong.status().message() == "/api/jobs/job-1/cancel answers POST");
  CHECK(ResolvePageRoute("DELETE", "/api/jobs").status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("who the caller is, and whether the request names the daemon by its address") {
  HttpRequest request = Request("GET", "/api/jobs");
  CHECK(CallerOfRequest(request).authorization == std::nullopt);
  CHECK(CallerOfRequest(request).peer == "ipv4:10.0.0.9:1");
  // A cookie is no credential here: browsers send one to every port of a host.
  request.headers["cookie"] = "horovodd_session=admin-secret";
  CHECK(CallerOfRequest(request).authorization == std::nullopt);
  request.headers["authorization"] = "Bearer t";
  CHECK(CallerOfRequest(request).authorization == std::optional<std::string>("Bearer t"));

  for (const char* host : {"127.0.0.1:9000", "127.0.0.1", "[::1]:9000", "10.0.0.5:80",
                           "localhost:9000", "localhost"}) {
    request.headers["host"] = host;
    CHECK(HostIsAnAddress(request));
  }
  for (const char* host : {"daemon:9000", "evil.example", "127.0.0.1.evil.example:80", ""}) {
    request.headers["host"] = host;
    CHECK_FALSE(HostIsAnAddress(request));
  }
  request.headers.erase("host");
  CHECK_FALSE(HostIsAnAddress(request));
}

TEST_CASE("no token: the page's files load, its data and actions are refused") {
  Tokens tokens;
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  StatusPage page(&jobs, tokens.policy.get());

  const HttpResponse index = page.Handle(Request("GET", "/"));
  CHECK(index.code == 200);
  CHECK(index.content_type == "text/html; charset=utf-8");
  CHECK(absl::StrContains(index.body, "<script src=\"/app.js\""));
  bool has_csp = false;
  for (const auto& [name, value] : index.headers) {
    has_csp |= name == "Content-Security-Policy" && absl::StrContains(value, "default-src 'self'");
  }
  CHECK(has_csp);
  CHECK(page.Handle(Request("GET", "/app.js")).content_type == "text/javascript; charset=utf-8");
  CHECK(page.Handle(Request("GET", "/app.css")).code == 200);

  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/api/session"},
                                                        {"GET", "/api/jobs"},
                                                        {"GET", "/api/jobs/job-1"},
                                                        {"GET", "/api/stream"},
                                                        {"POST", "/api/jobs/job-1/cancel"},
                                                        {"POST", "/api/hosts/node-1/drain"}}) {
    INFO(method << " " << target);
    const HttpResponse refused = page.Handle(Request(method, target));
    CHECK(refused.code == 401);
    CHECK(refused.content_type == "application/json");
    CHECK(absl::StrContains(refused.body, "the daemon requires a token"));
    CHECK_FALSE(refused.stream);
  }
  CHECK(page.Handle(Request("GET", "/api/jobs", "wrong")).code == 401);
  CHECK(jobs.cancelled.empty());
  CHECK(jobs.drained.empty());
  CHECK(page.Handle(Request("GET", "/nope")).code == 404);
  CHECK(page.Handle(Request("PUT", "/api/jobs")).code == 405);
}

TEST_CASE("the viewer token reads; its actions are refused by the server") {
  Tokens tokens;
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  StatusPage page(&jobs, tokens.policy.get());

  const HttpResponse session = page.Handle(Request("GET", "/api/session", "viewer-secret"));
  CHECK(session.code == 200);
  CHECK(absl::StartsWith(session.body, "{\"access\":\"read\",\"server_time_unix\":"));
  CHECK(page.Handle(Request("GET", "/api/jobs", "viewer-secret")).code == 200);
  CHECK(page.Handle(Request("GET", "/api/jobs/job-1", "viewer-secret")).code == 200);
  CHECK(page.Handle(Request("GET", "/api/jobs/job-9", "viewer-secret")).code == 404);
  CHECK(page.Handle(Request("GET", "/api/stream", "viewer-secret")).stream);

  for (const char* target :
       {"/api/jobs/job-1/cancel", "/api/hosts/node-1/drain", "/api/hosts/node-1/undrain"}) {
    const HttpResponse refused = page.Handle(Request("POST", target, "viewer-secret"));
    CHECK(refused.code == 403);
    CHECK(absl::StrContains(refused.body, "the viewer token may only read"));
  }
  CHECK(jobs.cancelled.empty());
  CHECK(jobs.drained.empty());
}

TEST_CASE("the admin token acts: cancel, drain, undrain; errors keep their meaning") {
  Tokens tokens;
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  StatusPage page(&jobs, tokens.policy.get());

  CHECK(absl::StrContains(page.Handle(Request("GET", "/api/session", "admin-secret")).body,
                          "\"access\":\"admin\""));
  const HttpResponse cancelled =
      page.Handle(Request("POST", "/api/jobs/job-1/cancel", "admin-secret"));
  CHECK(cancelled.code == 200);
  REQUIRE(jobs.cancelled.size() == 1);
  CHECK(jobs.cancelled[0] == "job-1: cancelled from the status page by ipv4:10.0.0.9:1");
  CHECK(page.Handle(Request("POST", "/api/jobs/job-9/cancel", "admin-secret")).code == 404);

  const HttpResponse drained =
      page.Handle(Request("POST", "/api/hosts/node-1/drain?job=job-1", "admin-secret"));
  CHECK(drained.code == 200);
  CHECK(drained.body == "{\"job_ids\":[\"job-1\"]}");
  CHECK(page.Handle(Request("POST", "/api/hosts/node-1/undrain", "admin-secret")).code == 200);
  CHECK(jobs.drained == std::vector<std::string>{"node-1 job-1 drained", "node-1  undrained"});
}

TEST_CASE("the loopback rule opens reads, never actions, and does not pass a wrong token off") {
  Tokens tokens(ReadOnlyAccess::kLoopback);
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  StatusPage page(&jobs, tokens.policy.get());
  const std::string local = "ipv4:127.0.0.1:4000";
  auto from_here = [&](const std::string& method, const std::string& target,
                       const std::string& token = "") {
    HttpRequest request = Request(method, target, token, local);
    request.headers["host"] = "127.0.0.1:9000";
    return page.Handle(request);
  };

  CHECK(from_here("GET", "/api/jobs").code == 200);
  CHECK(absl::StrContains(from_here("GET", "/api/session").body, "\"access\":\"read\""));
  CHECK(from_here("POST", "/api/jobs/job-1/cancel").code == 401);
  CHECK(page.Handle(Request("GET", "/api/jobs", "", "ipv4:10.0.0.9:1")).code == 401);
  // Logging in (the session with a token) checks the token itself.
  CHECK(from_here("GET", "/api/session", "guess").code == 401);
  CHECK(absl::StrContains(from_here("GET", "/api/session", "admin-secret").body,
                          "\"access\":\"admin\""));
  // A page of another site, its name rebound to 127.0.0.1, in a local browser.
  HttpRequest rebound = Request("GET", "/api/jobs", "", local);
  rebound.headers["host"] = "evil.example:9000";
  const HttpResponse refused = page.Handle(rebound);
  CHECK(refused.code == 403);
  CHECK(absl::StrContains(refused.body, "named by its address"));
  // With a token the name does not matter: the other site has none.
  rebound.headers["authorization"] = "Bearer viewer-secret";
  CHECK(page.Handle(rebound).code == 200);
}

TEST_CASE("JSON: the jobs table's summaries, a whole status, events, an error") {
  const v1::JobStatus job = RunningJob("job-1");
  const std::string list = JobsJson({job});
  CHECK(absl::StartsWith(list, "{\"jobs\":[{\"job_id\":\"job-1\","));
  CHECK(absl::StrContains(list, "\"state\":\"RUNNING\""));
  CHECK(absl::StrContains(list, "\"size\":2"));
  CHECK(absl::StrContains(list, "\"generation\":3"));  // a number, not a string
  CHECK(absl::StrContains(list, "\"workers\":[]"));
  CHECK(absl::StrContains(list, "\"hosts\":[]"));
  CHECK(!absl::StrContains(list, "s3cr3t"));

  const std::string whole = JobJson(job);
  CHECK(absl::StrContains(whole, "\"workers\":[{\"worker_id\":7,\"rank\":0,\"host\":\"node-1\""));
  CHECK(absl::StrContains(whole, "\"state\":\"WORKER_RUNNING\""));
  CHECK(absl::StrContains(whole, "\"cooldown_seconds_left\":12.5"));
  CHECK(absl::StrContains(whole, "\"cause\":\"worker failed\""));
  CHECK(whole.find('\n') == std::string::npos);

  CHECK(EventsJson({Event(5, v1::JobEvent::MEMBERSHIP, "size 2")}) ==
        absl::StrCat("{\"events\":[",
                     horovodd::MessageToJson(Event(5, v1::JobEvent::MEMBERSHIP, "size 2"), {0}),
                     "]}"));
  CHECK(ErrorJson("no \"job\"") == "{\"error\":\"no \\\"job\\\"\"}");
  CHECK(SessionJson(true, absl::FromUnixSeconds(100)) ==
        "{\"access\":\"admin\",\"server_time_unix\":100}");
  CHECK(SseEvent("log", "{\"a\":1}", 12) == "id: 12\nevent: log\ndata: {\"a\":1}\n\n");
  CHECK(SseEvent("x", "one\ntwo") == "event: x\ndata: one\ndata: two\n\n");
}

TEST_CASE("the feed: hello, the jobs, the job's events but output, its status, once each") {
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  jobs.events = {Event(1, v1::JobEvent::STATE, "running"), Event(2, v1::JobEvent::OUTPUT, "hi"),
                 Event(3, v1::JobEvent::MEMBERSHIP, "size 2")};
  StreamRequest request;
  request.job_id = "job-1";
  StreamTimings quick;
  quick.status_interval = absl::ZeroDuration();
  RecordingStream out(/*waits=*/3);
  RunPageStream(jobs, request, quick, out);

  CHECK(absl::StartsWith(out.written, "retry: 2000\n\nevent: hello\ndata: {\"access\":\"read\""));
  // Nothing changed after the first look: no repeats.
  CHECK(out.Names() == std::vector<std::string>{"hello", "log", "jobs", "job"});
  CHECK(absl::StrContains(out.written, "id: 3\nevent: log\n"));
  CHECK(absl::StrContains(out.written, "\"message\":\"running\""));
  CHECK(!absl::StrContains(out.written, "\"message\":\"hi\""));
}

TEST_CASE("the feed resumes after the last event seen, and says when a job is unknown") {
  FakeJobs jobs;
  jobs.jobs = {RunningJob("job-1")};
  jobs.events = {Event(1, v1::JobEvent::STATE, "first"), Event(2, v1::JobEvent::INFO, "second")};
  jobs.log_closed = true;
  StreamRequest request;
  request.job_id = "job-1";
  request.from_seq = 2;
  request.admin = true;
  RecordingStream out(/*waits=*/2);
  RunPageStream(jobs, request, StreamTimings(), out);
  CHECK(absl::StrContains(out.written, "\"access\":\"admin\""));
  CHECK(!absl::StrContains(out.written, "\"message\":\"first\""));
  CHECK(absl::StrContains(out.written, "\"message\":\"second\""));
  // A closed log is read once; then the feed only looks at statuses.
  CHECK(jobs.event_reads == 1);

  StreamRequest unknown;
  unknown.job_id = "job-9";
  RecordingStream missing(/*waits=*/1);
  RunPageStream(jobs, unknown, StreamTimings(), missing);
  CHECK(missing.Names() == std::vector<std::string>{"hello", "missing", "jobs"});
  CHECK(absl::StrContains(missing.written, "no job 'job-9'"));
}

TEST_CASE("the page's files are built in") {
  for (const char* name : {"index.html", "app.js", "app.css"}) {
    const PageAsset* asset = FindPageAsset(name);
    REQUIRE(asset != nullptr);
    CHECK(asset->content.size() > 100);
  }
  CHECK(FindPageAsset("nope.js") == nullptr);
  // Every file the page names is one the daemon serves: nothing from elsewhere.
  const absl::string_view html = FindPageAsset("index.html")->content;
  CHECK(!absl::StrContains(html, "http://"));
  CHECK(!absl::StrContains(html, "https://"));
  CHECK(!absl::StrContains(FindPageAsset("app.js")->content, "https://"));
}
