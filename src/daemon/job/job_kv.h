// A job's key-value namespace (KvNamespace) as its workers call it: Set, and
// Get that waits for its keys up to the request's timeout, which the loop's
// timer enforces. The driver checks who calls and moves it on to each new
// generation (AdvanceTo).
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/kv_namespace/kv_namespace.h"
#include "daemon/loop/event_loop.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobKv {
 public:
  using GetReply = std::function<void(absl::StatusOr<v1::KvGetResponse>)>;

  // `loop` outlives it.
  JobKv(KvLimits limits, EventLoop& loop) : kv_(limits), loop_(loop) {}

  absl::Status Set(const v1::KvSetRequest& request);
  // Replies once every key exists (maybe at once), ABORTED once the
  // generation is superseded, DEADLINE_EXCEEDED past the request's timeout
  // (30 s when it names none, at most an hour).
  void Get(const v1::KvGetRequest& request, GetReply reply);
  // Generations below `generation` are superseded.
  void AdvanceTo(int64_t generation) { kv_.AdvanceTo(generation); }

 private:
  // Wakes the loop at the earliest deadline of a waiting Get.
  void ScheduleExpiry();

  KvNamespace kv_;
  EventLoop& loop_;
  EventLoop::TimerId expiry_timer_ = 0;
};

}  // namespace horovodd::daemon
