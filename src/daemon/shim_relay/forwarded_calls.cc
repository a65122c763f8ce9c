// The relay's pass-through of the workers' unary calls (host_relay.h): each
// goes to the daemon as it is, on the relay's channel.
#include "daemon/shim_relay/relay_core.h"

namespace horovodd::shim {
namespace {

// A unary call forwarded on the relay's channel with the caller's
// deadline; the caller's cancel cancels it. Finished from its callback,
// so the reactor outlives it.
class ForwardedCall final : public grpc::ServerUnaryReactor {
 public:
  explicit ForwardedCall(grpc::CallbackServerContext* context) {
    client_.set_deadline(context->deadline());
  }
  grpc::ClientContext* client() { return &client_; }
  void OnCancel() override { client_.TryCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::ClientContext client_;
};

template <typename Call>
grpc::ServerUnaryReactor* ForwardCall(grpc::CallbackServerContext* context, bool wait_for_ready,
                                      Call call) {
  auto* forwarded = new ForwardedCall(context);
  forwarded->client()->set_wait_for_ready(wait_for_ready);
  call(forwarded->client(), [forwarded](grpc::Status status) { forwarded->Finish(status); });
  return forwarded;
}

}  // namespace

grpc::ServerUnaryReactor* HostRelay::Core::KvSet(grpc::CallbackServerContext* context,
                                                 const v1::KvSetRequest* request,
                                                 v1::KvSetResponse* response) {
  return ForwardCall(context, /*wait_for_ready=*/false,
                     [&](grpc::ClientContext* client, auto done) {
                       stub_->async()->KvSet(client, request, response, std::move(done));
                     });
}

grpc::ServerUnaryReactor* HostRelay::Core::KvGet(grpc::CallbackServerContext* context,
                                                 const v1::KvGetRequest* request,
                                                 v1::KvGetResponse* response) {
  return ForwardCall(context, /*wait_for_ready=*/false,
                     [&](grpc::ClientContext* client, auto done) {
                       stub_->async()->KvGet(client, request, response, std::move(done));
                     });
}

// The runtime's commit reports wait for a restarting daemon (until their
// deadline); so does the relay's.
grpc::ServerUnaryReactor* HostRelay::Core::ReportCommit(grpc::CallbackServerContext* context,
                                                        const v1::CommitReport* request,
                                                        v1::Empty* response) {
  return ForwardCall(context, /*wait_for_ready=*/true, [&](grpc::ClientContext* client, auto done) {
    stub_->async()->ReportCommit(client, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* HostRelay::Core::ReportFailure(grpc::CallbackServerContext* context,
                                                         const v1::FailureReport* request,
                                                         v1::Empty* response) {
  return ForwardCall(context, /*wait_for_ready=*/false,
                     [&](grpc::ClientContext* client, auto done) {
                       stub_->async()->ReportFailure(client, request, response, std::move(done));
                     });
}

grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* HostRelay::Core::AttachHost(
    grpc::CallbackServerContext*) {
  struct Refused : grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage> {
    Refused() {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "a relay carries workers' Attach streams, not host streams"));
    }
    void OnDone() override { delete this; }
  };
  return new Refused();
}

}  // namespace horovodd::shim
