// A raw SubmitJob client for test_submit_idempotency.py and test_ha_tls.py:
// one SubmitJob with a client request id of the test's choosing (horovodrun
// makes its own at random), sent to one daemon without following a standby's
// refusal, so the test sees exactly what that daemon answered:
//   "SubmitJob: OK <job id>"  or  "SubmitJob: <CODE>: <message>"
// then, when the answer's trailing metadata names a leader, "leader: <address>".
// TLS when HOROVODD_TLS_CA is set (with HOROVODD_TLS_CERT and
// HOROVODD_TLS_KEY for mutual TLS), as horovodctl reads them.
// Exits 0 when the call was made (whatever the daemon answered), 2 on a usage error.
//
//   submit_probe ADDR TOKEN_FILE REQUEST_ID CMD...
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
#include "common/standby_contract.h"
#include "horovodd.grpc.pb.h"

namespace {

namespace v1 = horovodd::v1;
constexpr int kDeadlineSeconds = 60;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "submit_probe: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> Credentials() {
  const char* ca = std::getenv("HOROVODD_TLS_CA");
  if (ca == nullptr || *ca == '\0') return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(ca);
  const char* cert = std::getenv("HOROVODD_TLS_CERT");
  const char* key = std::getenv("HOROVODD_TLS_KEY");
  if (cert != nullptr && key != nullptr) {
    ssl.pem_cert_chain = ReadFile(cert);
    ssl.pem_private_key = ReadFile(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: submit_probe ADDR TOKEN_FILE REQUEST_ID CMD...\n");
    return 2;
  }
  v1::SubmitJobRequest request;
  *request.mutable_spec() =
      horovodd::testing::OneLocalWorkerSpec(std::vector<std::string>(argv + 4, argv + argc));
  request.set_client_request_id(argv[3]);
  auto stub = v1::JobService::NewStub(grpc::CreateChannel(argv[1], Credentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds));
  context.AddMetadata("authorization",
                      "Bearer " + std::string(absl::StripAsciiWhitespace(ReadFile(argv[2]))));
  v1::SubmitJobResponse response;
  const grpc::Status status = stub->SubmitJob(&context, request, &response);
  if (status.ok()) {
    std::printf("SubmitJob: OK %s\n", response.job_id().c_str());
  } else {
    std::printf(
        "SubmitJob: %s: %s\n",
        absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())).c_str(),
        status.error_message().c_str());
  }
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto it = trailers.find(horovodd::kLeaderMetadataKey); it != trailers.end()) {
    std::printf("leader: %s\n", std::string(it->second.data(), it->second.size()).c_str());
  }
  return 0;
}
