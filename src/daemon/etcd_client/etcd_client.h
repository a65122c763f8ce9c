// A client of an etcd cluster's v3 API (the KV and Lease services), over the
// gRPC stubs generated from etcd's own definitions: one channel per member,
// each call sent to the member that last answered and, when that one cannot
// be reached, to the next. Every call has a deadline, so a cluster that lost
// its quorum fails calls (naming etcd) instead of blocking their callers.
//
// Threading: safe from any thread; gRPC channels and stubs are thread-safe
// and the member in use is guarded by a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace horovodd::daemon {

struct EtcdOptions {
  // host:port of each member's client URL.
  std::vector<std::string> endpoints;
  // TLS to the members: all empty is plaintext. The CA that signed the
  // members' certificates; a client certificate and key for members that
  // require one (etcd --client-cert-auth).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Each call's deadline, on each member tried.
  absl::Duration call_timeout = absl::Seconds(3);
};

// "etcd://h1:2379,h2:2379" (or without the scheme) to its endpoints;
// INVALID_ARGUMENT naming the text for an empty list or an endpoint without a port.
absl::StatusOr<std::vector<std::string>> ParseEtcdUrl(const std::string& url);

class EtcdClient {
 public:
  // Makes the channels; connects lazily (no member needs to be up yet).
  // INVALID_ARGUMENT for no endpoints, NOT_FOUND / PERMISSION_DENIED for a
  // TLS file that cannot be read.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdOptions options);
  ~EtcdClient();

  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  absl::StatusOr<etcdserverpb::PutResponse> Put(const etcdserverpb::PutRequest& request);

  // A lease of `ttl` (whole seconds, at least 1); its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews the lease once; NOT_FOUND once it has expired (or was revoked).
  // The TTL left, as etcd says.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease_id);
  absl::Status RevokeLease(int64_t lease_id);

  // Whether some member's connection is up now. When calls fail while it
  // is, that member answers but the cluster cannot decide (its quorum is
  // lost): no other client can write or win an election either. When no
  // member is connected, this client may be the one cut off.
  bool AnyMemberConnected() const;

  const EtcdOptions& options() const { return options_; }
  // "etcd at h1:2379,h2:2379", for messages.
  std::string Describe() const;

 private:
  struct Member;

  EtcdClient(EtcdOptions options, std::vector<std::unique_ptr<Member>> members);

  // Calls `call(member, context)` on the current member, then on each other
  // one while the error says the member could not be reached.
  template <typename Response, typename Call>
  absl::StatusOr<Response> OnAnyMember(const char* what, Call call) ABSL_LOCKS_EXCLUDED(mu_);

  const EtcdOptions options_;
  const std::vector<std::unique_ptr<Member>> members_;
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

// The first key after every key that starts with `prefix` (RangeRequest's
// range_end for "all keys under prefix").
std::string EtcdPrefixEnd(const std::string& prefix);

}  // namespace horovodd::daemon
