#include "daemon/workers/worker_channel.h"

namespace horovodd::daemon {
namespace {

thread_local ChannelBatch* open_batch = nullptr;

}  // namespace

ChannelBatch::ChannelBatch() : outermost_(open_batch == nullptr) {
  if (outermost_) open_batch = this;
}

ChannelBatch::~ChannelBatch() {
  if (!outermost_) return;
  open_batch = nullptr;  // what the flushes send goes out at once
  for (auto& flush : flushes_) flush();
}

ChannelBatch* ChannelBatch::Current() { return open_batch; }

}  // namespace horovodd::daemon
