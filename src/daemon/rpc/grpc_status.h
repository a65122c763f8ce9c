// absl::Status <-> grpc::Status. Both use the canonical codes, so this is a
// cast plus the message.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace horovodd {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace horovodd
