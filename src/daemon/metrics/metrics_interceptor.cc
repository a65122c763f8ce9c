#include "daemon/metrics/metrics_interceptor.h"

namespace horovodd::daemon {
namespace {

// Counting needs only the method name, which the factory sees when the call
// begins; it then declines to intercept, so calls pay for no interceptor.
class RpcCounter final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcCounter(Metrics* metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->method() != nullptr) metrics_->CountRpc(info->method());
    return nullptr;
  }

 private:
  Metrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcCounter(
    Metrics* metrics) {
  return std::make_unique<RpcCounter>(metrics);
}

}  // namespace horovodd::daemon
