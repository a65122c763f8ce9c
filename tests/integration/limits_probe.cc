// A raw gRPC client for test_limits.py: sends the daemon what horovodrun and
// the worker runtime never would (oversized messages, too many streams,
// malformed specs) and prints each call's outcome as one line:
//   "<label>: OK [detail]"  or  "<label>: <CODE>: <message>"
// Exits 0 when every call was made (whatever the daemon answered), 2 on a
// usage error.
//
//   limits_probe submit ADDR TOKEN_FILE NP MAX_NP ENV_NAME ENV_BYTES CMD...
//       SubmitJob of CMD on localhost; ENV_NAME (unless "-") set to ENV_BYTES x's.
//   limits_probe watch ADDR TOKEN_FILE JOB_ID N
//       Opens N WatchJob streams on one channel, holds them, reports each.
//   limits_probe worker-kv VALUE_BYTES KEYS
//       Run as a job's worker (identity from HOROVODD_* variables): KvSet of
//       KEYS keys of VALUE_BYTES bytes each, then one of VALUE_BYTES + 1.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/job_spec_support.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "horovodd.grpc.pb.h"

namespace {

namespace v1 = horovodd::v1;
constexpr int kDeadlineSeconds = 60;

void Report(const std::string& label, const grpc::Status& status, const std::string& detail = "") {
  if (status.ok()) {
    std::printf("%s: OK%s%s\n", label.c_str(), detail.empty() ? "" : " ", detail.c_str());
  } else {
    const std::string code =
        absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
    std::printf("%s: %s: %s\n", label.c_str(), code.c_str(), status.error_message().c_str());
  }
  std::fflush(stdout);
}

std::shared_ptr<grpc::Channel> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(256 << 20);  // the daemon, not the client, must refuse
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

int Number(const char* text) {
  int n = 0;
  if (!absl::SimpleAtoi(text, &n)) {
    std::fprintf(stderr, "limits_probe: '%s' is not a number\n", text);
    std::exit(2);
  }
  return n;
}

int Submit(int argc, char** argv) {
  if (argc < 9) return 2;
  const std::string token = ReadToken(argv[3]);
  const int np = Number(argv[4]);
  const int max_np = Number(argv[5]);
  const std::string env_name = argv[6];
  const int env_bytes = Number(argv[7]);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = horovodd::testing::LocalJobSpec(
      std::vector<std::string>(argv + 8, argv + argc), np, 1, max_np);
  if (env_name != "-") {
    (*request.mutable_spec()->mutable_env())[env_name] = std::string(env_bytes, 'x');
  }
  auto stub = v1::JobService::NewStub(Connect(argv[2]));
  auto context = Context(token);
  v1::SubmitJobResponse response;
  const grpc::Status status = stub->SubmitJob(context.get(), request, &response);
  Report("SubmitJob", status, response.job_id());
  return 0;
}

int Watch(int argc, char** argv) {
  if (argc != 6) return 2;
  const std::string token = ReadToken(argv[3]);
  const int count = Number(argv[5]);
  // One channel: one connection, one client address for the daemon.
  auto stub = v1::JobService::NewStub(Connect(argv[2]));
  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  std::vector<Stream> open;
  for (int i = 1; i <= count; ++i) {
    Stream stream{Context(token), nullptr};
    v1::WatchJobRequest request;
    request.set_job_id(argv[4]);
    stream.reader = stub->WatchJob(stream.context.get(), request);
    v1::JobEvent event;
    const std::string label = "watch " + std::to_string(i);
    // An open watch sends the job's first event at once; a refused one ends.
    if (stream.reader->Read(&event)) {
      Report(label, grpc::Status::OK, "open");
      open.push_back(std::move(stream));
    } else {
      Report(label, stream.reader->Finish());
    }
  }
  for (auto& stream : open) stream.context->TryCancel();
  for (auto& stream : open) stream.reader->Finish();
  return 0;
}

int WorkerKv(int argc, char** argv) {
  if (argc != 4) return 2;
  const int value_bytes = Number(argv[2]);
  const int keys = Number(argv[3]);
  const char* address = std::getenv("HOROVODD_DAEMON_ADDR");
  const char* job_id = std::getenv("HOROVODD_JOB_ID");
  const char* worker_id = std::getenv("HOROVODD_WORKER_ID");
  const char* token = std::getenv("HOROVODD_WORKER_TOKEN");
  if (address == nullptr || job_id == nullptr || worker_id == nullptr) {
    std::fprintf(stderr, "limits_probe: worker-kv runs as a job's worker (HOROVODD_* unset)\n");
    return 2;
  }
  auto stub = v1::WorkerService::NewStub(Connect(address));
  v1::WorkerIdentity who;
  who.set_job_id(job_id);
  who.set_worker_id(Number(worker_id));
  if (token != nullptr) who.set_token(token);
  auto set = [&](const std::string& key, int bytes) {
    v1::KvSetRequest request;
    *request.mutable_who() = who;
    request.set_generation(1);
    request.set_key(key);
    request.set_value(std::string(bytes, 'v'));
    v1::KvSetResponse response;
    auto context = Context("");
    const grpc::Status status = stub->KvSet(context.get(), request, &response);
    Report("KvSet " + key + " " + std::to_string(bytes), status);
  };
  for (int i = 0; i < keys; ++i) set("key" + std::to_string(i), value_bytes);
  set("big", value_bytes + 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (command == "submit") rc = Submit(argc, argv);
  if (command == "watch") rc = Watch(argc, argv);
  if (command == "worker-kv") rc = WorkerKv(argc, argv);
  if (rc == 2) std::fprintf(stderr, "limits_probe: bad usage (see the top of limits_probe.cc)\n");
  return rc;
}
