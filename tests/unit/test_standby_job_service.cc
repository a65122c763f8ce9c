// A standby's JobService (issue 36) against a stand-in leader on loopback:
// writes refused with the exact message and trailing metadata of
// common/standby_contract.h, reads forwarded with the caller's token, and
// UNAVAILABLE while no daemon leads.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/standby_contract.h"
#include "daemon/standby/standby_job_service.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {
namespace {

// The leader: answers GetJob, remembering the token it was shown.
class StandInLeader final : public v1::JobService::Service {
 public:
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override {
    auto it = context->client_metadata().find("authorization");
    absl::MutexLock lock(&mu_);
    if (it != context->client_metadata().end()) {
      authorization_ = std::string(it->second.data(), it->second.size());
    }
    response->set_job_id(request->job_id());
    return grpc::Status::OK;
  }
  std::string authorization() {
    absl::MutexLock lock(&mu_);
    return authorization_;
  }

 private:
  absl::Mutex mu_;
  std::string authorization_ ABSL_GUARDED_BY(mu_);
};

struct Served {
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

Served Serve(grpc::Service* service) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  Served served;
  served.server = builder.BuildAndStart();
  served.address = absl::StrCat("127.0.0.1:", port);
  return served;
}

std::string Trailing(const grpc::ClientContext& context, const std::string& key) {
  auto it = context.GetServerTrailingMetadata().find(key);
  return it == context.GetServerTrailingMetadata().end()
             ? ""
             : std::string(it->second.data(), it->second.size());
}

TEST_CASE("A standby refuses writes naming the leader, and forwards reads to it") {
  StandInLeader leader;
  Served leading = Serve(&leader);
  StandbyJobService standby(grpc::InsecureChannelCredentials(), nullptr);
  Served standing = Serve(&standby);
  standby.SetSelf(standing.address);
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(standing.address, grpc::InsecureChannelCredentials()));

  SECTION("while no daemon leads") {
    grpc::ClientContext submit;
    v1::SubmitJobResponse submitted;
    grpc::Status status = stub->SubmitJob(&submit, v1::SubmitJobRequest(), &submitted);
    CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(status.error_message() == absl::StrCat("this horovodd (", standing.address,
                                                 ") is a standby; no leader is elected yet"));
    CHECK(Trailing(submit, kLeaderMetadataKey).empty());

    grpc::ClientContext get;
    v1::GetJobRequest request;
    request.set_job_id("j1");
    v1::JobStatus job;
    status = stub->GetJob(&get, request, &job);
    CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(status.error_message().find("election") != std::string::npos);
  }

  SECTION("while another leads") {
    standby.SetLeader(leading.address);
    for (int write = 0; write < 4; ++write) {
      grpc::ClientContext context;
      grpc::Status status;
      if (write == 0) {
        v1::SubmitJobResponse r;
        status = stub->SubmitJob(&context, v1::SubmitJobRequest(), &r);
      } else if (write == 1) {
        v1::CancelJobResponse r;
        status = stub->CancelJob(&context, v1::CancelJobRequest(), &r);
      } else if (write == 2) {
        v1::DrainHostResponse r;
        status = stub->DrainHost(&context, v1::DrainHostRequest(), &r);
      } else {
        v1::DrainHostResponse r;
        status = stub->UndrainHost(&context, v1::DrainHostRequest(), &r);
      }
      INFO("write " << write);
      CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
      CHECK(status.error_message() == absl::StrCat("this horovodd (", standing.address,
                                                   ") is a standby; the leader is ",
                                                   leading.address));
      CHECK(Trailing(context, kLeaderMetadataKey) == leading.address);
    }

    grpc::ClientContext get;
    get.AddMetadata("authorization", "Bearer secret");
    v1::GetJobRequest request;
    request.set_job_id("j1");
    v1::JobStatus job;
    grpc::Status status = stub->GetJob(&get, request, &job);
    REQUIRE(status.ok());
    CHECK(job.job_id() == "j1");
    CHECK(leader.authorization() == "Bearer secret");
  }
  standing.server->Shutdown();
  leading.server->Shutdown();
}

}  // namespace
}  // namespace horovodd::daemon
