#include "daemon/etcd_client/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("etcd ", what, " ", path, " cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether another member may do better than this one did.
bool MemberUnreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

absl::Status FromGrpc(const std::string& endpoint, const char* what, const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("etcd ", what, " at ", endpoint, ": ", status.error_message()));
}

}  // namespace

struct EtcdClient::Member {
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
};

absl::StatusOr<std::vector<std::string>> ParseEtcdUrl(const std::string& url) {
  absl::string_view rest = url;
  absl::ConsumePrefix(&rest, "etcd://");
  std::vector<std::string> endpoints;
  for (absl::string_view endpoint : absl::StrSplit(rest, ',', absl::SkipWhitespace())) {
    endpoint = absl::StripAsciiWhitespace(endpoint);
    const size_t colon = endpoint.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 || colon + 1 == endpoint.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", endpoint, "' in '", url, "' is not host:port"));
    }
    endpoints.emplace_back(endpoint);
  }
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", url, "' names no etcd endpoint (etcd://host:port,host:port,...)"));
  }
  return endpoints;
}

std::string EtcdPrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints");
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      HVDD_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile("CA file", options.ca_file));
    }
    if (options.cert_file.empty() != options.key_file.empty()) {
      return absl::InvalidArgumentError(
          "an etcd client certificate needs its key, and a key its certificate");
    }
    if (!options.cert_file.empty()) {
      HVDD_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile("certificate", options.cert_file));
      HVDD_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile("key", options.key_file));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<Member>> members;
  for (const std::string& endpoint : options.endpoints) {
    auto member = std::make_unique<Member>();
    member->endpoint = endpoint;
    grpc::ChannelArguments args;
    // A member that went away is tried again soon after it is back.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    member->channel = grpc::CreateCustomChannel(endpoint, credentials, args);
    member->kv = etcdserverpb::KV::NewStub(member->channel);
    member->lease = etcdserverpb::Lease::NewStub(member->channel);
    members.push_back(std::move(member));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options), std::move(members)));
}

EtcdClient::EtcdClient(EtcdOptions options, std::vector<std::unique_ptr<Member>> members)
    : options_(std::move(options)), members_(std::move(members)) {}

EtcdClient::~EtcdClient() = default;

bool EtcdClient::AnyMemberConnected() const {
  for (const auto& member : members_) {
    if (member->channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) return true;
  }
  return false;
}

std::string EtcdClient::Describe() const {
  return absl::StrCat("etcd at ", absl::StrJoin(options_.endpoints, ","));
}

template <typename Response, typename Call>
absl::StatusOr<Response> EtcdClient::OnAnyMember(const char* what, Call call) {
  size_t first;
  {
    absl::MutexLock lock(&mu_);
    first = current_;
  }
  absl::Status last;
  for (size_t tried = 0; tried < members_.size(); ++tried) {
    const size_t index = (first + tried) % members_.size();
    Member& member = *members_[index];
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
    Response response;
    const grpc::Status status = call(member, &context, &response);
    if (status.ok()) {
      if (index != first) {
        absl::MutexLock lock(&mu_);
        current_ = index;
      }
      return response;
    }
    last = FromGrpc(member.endpoint, what, status);
    if (!MemberUnreachable(status)) return last;
  }
  return last;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  return OnAnyMember<etcdserverpb::RangeResponse>(
      "range", [&](Member& m, grpc::ClientContext* context, etcdserverpb::RangeResponse* response) {
        return m.kv->Range(context, request, response);
      });
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  return OnAnyMember<etcdserverpb::TxnResponse>(
      "txn", [&](Member& m, grpc::ClientContext* context, etcdserverpb::TxnResponse* response) {
        return m.kv->Txn(context, request, response);
      });
}

absl::StatusOr<etcdserverpb::PutResponse> EtcdClient::Put(const etcdserverpb::PutRequest& request) {
  return OnAnyMember<etcdserverpb::PutResponse>(
      "put", [&](Member& m, grpc::ClientContext* context, etcdserverpb::PutResponse* response) {
        return m.kv->Put(context, request, response);
      });
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  HVDD_ASSIGN_OR_RETURN(
      auto response,
      OnAnyMember<etcdserverpb::LeaseGrantResponse>(
          "lease grant",
          [&](Member& m, grpc::ClientContext* context, etcdserverpb::LeaseGrantResponse* r) { return m.lease->LeaseGrant(context, request, r);
          }));
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease_id) {
  HVDD_ASSIGN_OR_RETURN(
      auto response,
      OnAnyMember<etcdserverpb::LeaseKeepAliveResponse>(
          "lease keep-alive",
          [&](Member& m, grpc::ClientContext* context, etcdserverpb::LeaseKeepAliveResponse* r) {
            // One renewal per stream: renewals are seconds apart.
            auto stream = m.lease->LeaseKeepAlive(context);
            etcdserverpb::LeaseKeepAliveRequest request;
            request.set_id(lease_id);
            if (!stream->Write(request) || !stream->Read(r)) {
              context->TryCancel();
              grpc::Status status = stream->Finish();
              return status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                "the keep-alive stream ended")
                                 : status;
            }
            stream->WritesDone();
            context->TryCancel();
            stream->Finish().ok();  // cancelled by us: its status says so
            return grpc::Status::OK;
          }));
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease_id, " has expired"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease_id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  return OnAnyMember<etcdserverpb::LeaseRevokeResponse>(
             "lease revoke",
             [&](Member& m, grpc::ClientContext* context, etcdserverpb::LeaseRevokeResponse* r) {
               return m.lease->LeaseRevoke(context, request, r);
             })
      .status();
}

}  // namespace horovodd::daemon
