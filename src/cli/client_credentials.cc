#include "cli/client_credentials.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/pem_file.h"
#include "common/status_macros.h"

namespace horovodd::cli {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// `origin` names the flag or variable the path came from.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& origin) {
  HVDD_ASSIGN_OR_RETURN(auto content, ReadWholeFile(path, origin));
  std::string token(absl::StripAsciiWhitespace(content));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": token file ", path, " is empty"));
  }
  return token;
}

// Adds the token to every call's headers before they are sent.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;  // owned by the factory, which outlives the channel's calls
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::string> ResolveToken(const ClientSecurity& security) {
  if (!security.token_file.empty()) return ReadTokenFile(security.token_file, "--token-file");
  if (std::string token = Env("HOROVODD_TOKEN"); !token.empty()) {
    return std::string(absl::StripAsciiWhitespace(token));
  }
  if (std::string path = Env("HOROVODD_TOKEN_FILE"); !path.empty()) {
    return ReadTokenFile(path, "HOROVODD_TOKEN_FILE");
  }
  // An operator on the daemon's own host, with access to its state dir.
  if (access(kDefaultAdminTokenFile, R_OK) == 0) {
    return ReadTokenFile(kDefaultAdminTokenFile, kDefaultAdminTokenFile);
  }
  return std::string();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ResolveChannelCredentials(
    const ClientSecurity& security) {
  struct File {
    std::string path;
    std::string origin;
  };
  auto pick = [](const std::string& flag_value, const char* flag, const char* env) {
    if (!flag_value.empty()) return File{flag_value, flag};
    return File{Env(env), env};
  };
  const File ca = pick(security.tls_ca, "--tls-ca", "HOROVODD_TLS_CA");
  const File cert = pick(security.tls_cert, "--tls-cert", "HOROVODD_TLS_CERT");
  const File key = pick(security.tls_key, "--tls-key", "HOROVODD_TLS_KEY");
  if (ca.path.empty() && cert.path.empty() && key.path.empty() && Env("HOROVODD_TLS") != "1") {
    return grpc::InsecureChannelCredentials();
  }
  if (cert.path.empty() != key.path.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key: give both --tls-cert and --tls-key "
        "(or HOROVODD_TLS_CERT and HOROVODD_TLS_KEY)");
  }
  grpc::SslCredentialsOptions options;
  for (const auto& [file, field] :
       {std::pair{&ca, &options.pem_root_certs}, std::pair{&cert, &options.pem_cert_chain},
        std::pair{&key, &options.pem_private_key}}) {
    if (file->path.empty()) continue;
    HVDD_ASSIGN_OR_RETURN(auto content, ReadPemFile(file->path, file->origin));
    *field = std::move(content);
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateDaemonChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> adders;
  if (!token.empty()) adders.push_back(std::make_unique<BearerTokenFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, std::move(credentials), grpc::ChannelArguments(), std::move(adders));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectToDaemon(const std::string& address,
                                                               const ClientSecurity& security) {
  HVDD_ASSIGN_OR_RETURN(auto token, ResolveToken(security));
  HVDD_ASSIGN_OR_RETURN(auto credentials, ResolveChannelCredentials(security));
  return CreateDaemonChannel(address, std::move(credentials), token);
}

}  // namespace horovodd::cli
