#include "daemon/job/job_kv.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace horovodd::daemon {

absl::Status JobKv::Set(const v1::KvSetRequest& request) {
  return kv_.Set(request.generation(), request.key(), request.value());
}

void JobKv::Get(const v1::KvGetRequest& request, GetReply reply) {
  double timeout = request.timeout_seconds() > 0 ? request.timeout_seconds() : 30;
  std::vector<std::string> keys(request.keys().begin(), request.keys().end());
  kv_.Get(request.generation(), std::move(keys),
          loop_.clock().Now() + absl::Seconds(std::min(timeout, 3600.0)),
          [reply = std::move(reply)](absl::StatusOr<std::vector<std::string>> values) {
            if (!values.ok()) {
              reply(values.status());
              return;
            }
            v1::KvGetResponse response;
            for (auto& v : *values) response.add_values(std::move(v));
            reply(std::move(response));
          });
  ScheduleExpiry();
}

void JobKv::ScheduleExpiry() {
  absl::Time next = kv_.NextDeadline();
  if (expiry_timer_ != 0) loop_.Cancel(expiry_timer_);
  expiry_timer_ = 0;
  if (next == absl::InfiniteFuture()) return;
  expiry_timer_ = loop_.PostAt(next, [this] {
    expiry_timer_ = 0;
    kv_.ExpireWaiters(loop_.clock().Now());
    ScheduleExpiry();
  });
}

}  // namespace horovodd::daemon
