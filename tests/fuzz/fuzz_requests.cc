// Every RPC request of the daemon, decoded from arbitrary bytes and validated.
// The first byte picks the request type; the rest is its protobuf encoding.
// Each is checked against the default limits and against tiny ones (so the
// size refusals are reached too). A validator must never crash, and a refusal
// must be INVALID_ARGUMENT or RESOURCE_EXHAUSTED with a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "daemon/validation/request_validation.h"

namespace {

using horovodd::daemon::DaemonLimits;

DaemonLimits TinyLimits() {
  DaemonLimits limits;
  limits.max_workers_per_job = 2;
  limits.max_job_spec_bytes = 64;
  limits.max_kv_key_bytes = 4;
  limits.max_kv_value_bytes = 8;
  limits.max_kv_keys_per_job = 2;
  return limits;
}

void CheckRefusal(const absl::Status& status) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kResourceExhausted) {
    std::abort();
  }
  if (status.message().empty()) std::abort();
}

template <typename Request>
void Validate(const uint8_t* data, size_t size) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;  // gRPC drops these too
  static const DaemonLimits kDefaults;
  static const DaemonLimits kTiny = TinyLimits();
  CheckRefusal(horovodd::daemon::ValidateRequest(request, kDefaults));
  CheckRefusal(horovodd::daemon::ValidateRequest(request, kTiny));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  namespace v1 = horovodd::v1;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 13) {
    case 0:
      Validate<v1::SubmitJobRequest>(body, n);
      break;
    case 1:
      Validate<v1::GetJobRequest>(body, n);
      break;
    case 2:
      Validate<v1::ListJobsRequest>(body, n);
      break;
    case 3:
      Validate<v1::WatchJobRequest>(body, n);
      break;
    case 4:
      Validate<v1::CancelJobRequest>(body, n);
      break;
    case 5:
      Validate<v1::DrainHostRequest>(body, n);
      break;
    case 6:
      Validate<v1::GetWorkerOutputRequest>(body, n);
      break;
    case 7:
      Validate<v1::KvSetRequest>(body, n);
      break;
    case 8:
      Validate<v1::KvGetRequest>(body, n);
      break;
    case 9:
      Validate<v1::WorkerMessage>(body, n);
      break;
    case 10:
      Validate<v1::CommitReport>(body, n);
      break;
    case 11:
      Validate<v1::FailureReport>(body, n);
      break;
    default:
      Validate<v1::StopDaemonRequest>(body, n);
      break;
  }
  return 0;
}
