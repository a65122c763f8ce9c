// The limits of an in-process DaemonServer (127.0.0.1:0, real gRPC): streams
// per client, message size, key-value sizes and counts, job spec checks. Each
// refusal is RESOURCE_EXHAUSTED (or INVALID_ARGUMENT for malformed input)
// naming the limit's config key, and the daemon goes on serving.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"

using namespace horovodd;

namespace {

constexpr int kDeadlineSeconds = 60;  // "did not hang", not an expectation

struct TestDaemon {
  std::unique_ptr<daemon::DaemonServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::JobService::Stub> jobs;
  std::unique_ptr<v1::WorkerService::Stub> workers;

  explicit TestDaemon(const daemon::DaemonLimits& limits) {
    daemon::DaemonOptions options;
    options.limits = limits;
    auto started = daemon::DaemonServer::Start(options);
    INFO(started.status().message());
    REQUIRE(started.ok());
    server = std::move(*started);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    channel =
        grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), args);
    jobs = v1::JobService::NewStub(channel);
    workers = v1::WorkerService::NewStub(channel);
  }

  // A context with a deadline and the admin token.
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(kDeadlineSeconds));
    context->AddMetadata("authorization", "Bearer " + server->admin_token());
    return context;
  }

  grpc::Status Submit(const v1::JobSpec& spec, std::string* id) {
    auto context = Context();
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitJobResponse response;
    grpc::Status st = jobs->SubmitJob(context.get(), request, &response);
    *id = response.job_id();
    return st;
  }

  void Cancel(const std::string& id) {
    auto context = Context();
    v1::CancelJobRequest request;
    request.set_job_id(id);
    v1::CancelJobResponse response;
    CHECK(jobs->CancelJob(context.get(), request, &response).ok());
  }

  // A worker of job `id`, with the job's token.
  v1::WorkerIdentity Worker(const std::string& id) {
    auto driver = server->jobs().Find(id);
    REQUIRE(driver != nullptr);
    v1::WorkerIdentity who;
    who.set_job_id(id);
    who.set_worker_id(1);
    who.set_token(driver->worker_token());
    return who;
  }

  grpc::Status KvSet(const v1::WorkerIdentity& who, const std::string& key, std::string value) {
    auto context = Context();
    v1::KvSetRequest request;
    *request.mutable_who() = who;
    request.set_generation(1);
    request.set_key(key);
    request.set_value(std::move(value));
    v1::KvSetResponse response;
    return workers->KvSet(context.get(), request, &response);
  }
};

v1::JobSpec Spec(std::vector<std::string> argv) {
  v1::JobSpec spec = testing::OneLocalWorkerSpec(std::move(argv));
  spec.set_liveness_timeout_seconds(600);
  return spec;
}

#define CHECK_STATUS(call, code_, text)                     \
  do {                                                      \
    grpc::Status st_ = (call);                              \
    CHECK(st_.error_code() == grpc::StatusCode::code_);     \
    CHECK_THAT(st_.error_message(), Catch::Contains(text)); \
  } while (false)

// Waits (generously) until the job's first worker is known to its driver: a
// key-value write from it then reaches the namespace instead of NOT_FOUND.
grpc::Status KvSetOnceWorkerExists(TestDaemon& d, const v1::WorkerIdentity& who,
                                   const std::string& key, const std::string& value) {
  const absl::Time deadline = absl::Now() + absl::Seconds(kDeadlineSeconds);
  grpc::Status st;
  do {
    st = d.KvSet(who, key, value);
    if (st.error_code() != grpc::StatusCode::NOT_FOUND) return st;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  return st;
}

}  // namespace

TEST_CASE("WatchJob streams past limits.max_watch_streams_per_client are refused until one ends") {
  daemon::DaemonLimits limits;
  limits.max_watch_streams_per_client = 2;
  TestDaemon d(limits);
  std::string id;
  REQUIRE(d.Submit(Spec({"/bin/sleep", "300"}), &id).ok());

  struct Watch {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  auto open = [&] {
    Watch w{d.Context(), nullptr};
    v1::WatchJobRequest request;
    request.set_job_id(id);
    w.reader = d.jobs->WatchJob(w.context.get(), request);
    return w;
  };
  std::vector<Watch> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(open());
    v1::JobEvent first;
    REQUIRE(held.back().reader->Read(&first));  // the stream is open on the daemon
  }
  Watch refused = open();
  v1::JobEvent event;
  CHECK_FALSE(refused.reader->Read(&event));
  CHECK_STATUS(refused.reader->Finish(), RESOURCE_EXHAUSTED,
               "already holds 2 WatchJob streams open, the limit "
               "(limits.max_watch_streams_per_client)");

  // One ends: another may open (the daemon notices the cancel within its
  // watch poll, so retry until then).
  held.front().context->TryCancel();
  held.front().reader->Finish();
  bool reopened = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(kDeadlineSeconds);
  while (!reopened && absl::Now() < deadline) {
    Watch again = open();
    reopened = again.reader->Read(&event);
    again.context->TryCancel();
    again.reader->Finish();
  }
  CHECK(reopened);
  for (size_t i = 1; i < held.size(); ++i) held[i].context->TryCancel();
  for (size_t i = 1; i < held.size(); ++i) held[i].reader->Finish();
  d.Cancel(id);
}

TEST_CASE("Attach streams past limits.max_attach_streams_per_client are refused") {
  daemon::DaemonLimits limits;
  limits.max_attach_streams_per_client = 1;
  TestDaemon d(limits);
  std::string id;
  REQUIRE(d.Submit(Spec({"/bin/sleep", "300"}), &id).ok());
  const v1::WorkerIdentity who = d.Worker(id);
  REQUIRE(KvSetOnceWorkerExists(d, who, "k", "v").ok());  // worker 1 exists now

  // The first stream says hello as worker 1; the daemon's answer proves it
  // holds the client's one slot.
  auto first_context = d.Context();
  auto first = d.workers->Attach(first_context.get());
  v1::WorkerMessage hello;
  *hello.mutable_hello() = who;
  REQUIRE(first->Write(hello));
  v1::DaemonMessage message;
  REQUIRE(first->Read(&message));

  auto second_context = d.Context();
  auto second = d.workers->Attach(second_context.get());
  CHECK_FALSE(second->Read(&message));
  CHECK_STATUS(second->Finish(), RESOURCE_EXHAUSTED,
               "already holds 1 Attach streams open, the limit "
               "(limits.max_attach_streams_per_client)");

  // A message with no body ends the first one.
  REQUIRE(first->Write(v1::WorkerMessage()));
  while (first->Read(&message)) {
  }
  CHECK_STATUS(first->Finish(), INVALID_ARGUMENT, "a hello, a heartbeat or a rendezvous");
  d.Cancel(id);
}

TEST_CASE("a request over limits.max_message_bytes is refused by gRPC; the daemon serves on") {
  daemon::DaemonLimits limits;
  limits.max_message_bytes = 1 << 20;
  limits.max_kv_value_bytes = 64 << 10;
  limits.max_job_spec_bytes = 64 << 10;
  TestDaemon d(limits);
  std::string id;
  v1::JobSpec huge = Spec({"/bin/true"});
  (*huge.mutable_env())["BIG"] = std::string(2 << 20, 'x');
  CHECK_STATUS(d.Submit(huge, &id), RESOURCE_EXHAUSTED, "larger than max");
  v1::JobSpec big = Spec({"/bin/true"});
  (*big.mutable_env())["BIG"] = std::string(100 << 10, 'x');
  CHECK_STATUS(d.Submit(big, &id), RESOURCE_EXHAUSTED, "(limits.max_job_spec_bytes)");
  CHECK(d.Submit(Spec({"/bin/true"}), &id).ok());
}

TEST_CASE("key-value values, keys and key counts past the limits; other jobs unaffected") {
  daemon::DaemonLimits limits;
  limits.max_kv_value_bytes = 1024;
  limits.max_kv_keys_per_job = 3;
  TestDaemon d(limits);
  std::string id;
  REQUIRE(d.Submit(Spec({"/bin/sleep", "300"}), &id).ok());
  const v1::WorkerIdentity who = d.Worker(id);
  REQUIRE(KvSetOnceWorkerExists(d, who, "k0", "v").ok());
  CHECK_STATUS(d.KvSet(who, "big", std::string(1025, 'x')), RESOURCE_EXHAUSTED,
               "is 1025 bytes; the limit is 1024 bytes (limits.max_kv_value_bytes)");
  CHECK_STATUS(d.KvSet(who, std::string(2000, 'k'), "v"), RESOURCE_EXHAUSTED,
               "(limits.max_kv_key_bytes)");
  CHECK(d.KvSet(who, "k1", "v").ok());
  CHECK(d.KvSet(who, "k2", "v").ok());
  CHECK_STATUS(d.KvSet(who, "k3", "v"), RESOURCE_EXHAUSTED, "(limits.max_kv_keys_per_job)");

  // Another job has its own namespace.
  std::string other;
  REQUIRE(d.Submit(Spec({"/bin/sleep", "300"}), &other).ok());
  CHECK(KvSetOnceWorkerExists(d, d.Worker(other), "k3", "v").ok());
  d.Cancel(id);
  d.Cancel(other);
}

TEST_CASE("a bad environment name is INVALID_ARGUMENT naming it; no job is made") {
  TestDaemon d(daemon::DaemonLimits{});
  v1::JobSpec spec = Spec({"/bin/true"});
  (*spec.mutable_env())["BAD-NAME"] = "x";
  std::string id;
  CHECK_STATUS(d.Submit(spec, &id), INVALID_ARGUMENT,
               "env: environment variable name 'BAD-NAME' is not valid");
  spec = Spec({"/bin/true"});
  (*spec.mutable_env())["HOROVODD_WORKER_TOKEN"] = "forged";
  CHECK_STATUS(d.Submit(spec, &id), INVALID_ARGUMENT, "HOROVODD_WORKER_TOKEN is reserved");
  CHECK(d.server->jobs().List().empty());
}
