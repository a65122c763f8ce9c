// The table GuardedJobService is built from (JobServiceMethods()): one row
// for every RPC of horovodd.v1.JobService, as the proto's descriptor lists
// them, so an RPC added to the proto without a row fails here; and each
// row's access level holds on a real daemon (127.0.0.1:0), called by the
// descriptor's method names rather than a stub, so a new RPC is covered
// without touching this file.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "cli/client_credentials.h"
#include "daemon/rpc/guarded_job_service.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"

using namespace horovodd;
namespace fs = std::filesystem;

namespace {

constexpr int kDeadlineSeconds = 60;  // "did not hang", not an expectation
constexpr char kViewerToken[] = "viewer-token-for-the-table-test";

const google::protobuf::ServiceDescriptor& JobServiceDescriptor() {
  const auto* service = v1::SubmitJobRequest::descriptor()->file()->FindServiceByName("JobService");
  REQUIRE(service != nullptr);
  return *service;
}

// A daemon with an admin token (its own) and a viewer token (ours).
struct DaemonWithViewer {
  fs::path dir;
  std::unique_ptr<daemon::DaemonServer> server;

  DaemonWithViewer() {
    std::string pattern = (fs::temp_directory_path() / "hvdd-table-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    const fs::path viewer = dir / "viewer.token";
    std::ofstream(viewer) << kViewerToken << "\n";
    REQUIRE(chmod(viewer.c_str(), 0600) == 0);
    daemon::DaemonOptions options;
    options.listen_address = "127.0.0.1:0";
    options.auth.viewer_token_file = viewer.string();
    auto started = daemon::DaemonServer::Start(options);
    INFO(started.status().message());
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  ~DaemonWithViewer() {
    server.reset();
    fs::remove_all(dir);
  }
};

// Calls `method` of JobService with an empty request, carrying `token` ("":
// none), reads whatever it answers and returns its status. Unary and
// server-streaming calls look the same here: one request, then responses
// until the status.
grpc::Status CallWithEmptyRequest(const std::string& address, const std::string& method,
                                  const std::string& token) {
  auto channel = cli::CreateDaemonChannel(address, grpc::InsecureChannelCredentials(), token);
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds));
  auto call = stub.PrepareCall(&context, absl::StrCat("/horovodd.v1.JobService/", method), &queue);
  REQUIRE(call != nullptr);

  // One operation at a time: start it, then wait for its completion.
  auto await = [&queue](int tag) {
    void* got = nullptr;
    bool ok = false;
    REQUIRE(queue.Next(&got, &ok));
    REQUIRE(got == reinterpret_cast<void*>(static_cast<intptr_t>(tag)));
    return ok;
  };
  auto tag = [](int n) { return reinterpret_cast<void*>(static_cast<intptr_t>(n)); };

  call->StartCall(tag(1));
  if (await(1)) {
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1);
    call->Write(request, tag(2));
    if (await(2)) {
      call->WritesDone(tag(3));
      await(3);
    }
    grpc::ByteBuffer response;
    for (bool more = true; more;) {
      call->Read(&response, tag(4));
      more = await(4);
    }
  }
  grpc::Status status;
  call->Finish(&status, tag(5));
  await(5);
  queue.Shutdown();
  void* drained = nullptr;
  bool ok = false;
  while (queue.Next(&drained, &ok)) {
  }
  return status;
}

bool Refused(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
}

}  // namespace

TEST_CASE("every JobService RPC has exactly one row in the table") {
  const google::protobuf::ServiceDescriptor& service = JobServiceDescriptor();
  const auto rows = daemon::JobServiceMethods();
  CHECK(rows.size() == static_cast<size_t>(service.method_count()));
  for (int i = 0; i < service.method_count(); ++i) {
    const google::protobuf::MethodDescriptor* method = service.method(i);
    INFO("RPC " << method->name());
    int matching = 0;
    for (const auto& row : rows) {
      if (method->name() == row.name) {
        ++matching;
        CHECK(row.server_stream == method->server_streaming());
      }
    }
    CHECK(matching == 1);
  }
  for (const auto& row : rows) {
    INFO("row " << row.name);
    CHECK(service.FindMethodByName(row.name) != nullptr);
  }
}

TEST_CASE("each row's access level holds: the viewer token opens the read rows alone") {
  DaemonWithViewer d;
  const std::string address = d.server->address();
  const std::string admin = d.server->admin_token();
  int admin_rows = 0;
  int read_rows = 0;
  for (const auto& row : daemon::JobServiceMethods()) {
    INFO("RPC " << row.name);
    const grpc::Status as_viewer = CallWithEmptyRequest(address, row.name, kViewerToken);
    const grpc::Status as_admin = CallWithEmptyRequest(address, row.name, admin);
    const grpc::Status anonymous = CallWithEmptyRequest(address, row.name, "");
    INFO("viewer: " << as_viewer.error_code() << " " << as_viewer.error_message());
    INFO("admin: " << as_admin.error_code() << " " << as_admin.error_message());
    INFO("no token: " << anonymous.error_code() << " " << anonymous.error_message());

    if (row.access == daemon::Access::kAdmin) {
      ++admin_rows;
      CHECK(as_viewer.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    } else {
      ++read_rows;
      // Past the token: an empty request may be invalid or name no job, but
      // the call was let in.
      CHECK_FALSE(Refused(as_viewer));
      CHECK(as_viewer.error_code() != grpc::StatusCode::UNIMPLEMENTED);
    }
    CHECK_FALSE(Refused(as_admin));
    CHECK(as_admin.error_code() != grpc::StatusCode::UNIMPLEMENTED);
    CHECK(anonymous.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  // Both kinds are there, so neither branch above is vacuous.
  CHECK(admin_rows > 0);
  CHECK(read_rows > 0);
}
