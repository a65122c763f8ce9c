// The daemon's end of an AttachHost stream (horovodd.proto: HostMessage):
// the Attach streams of several workers of one job, on one host, carried on
// one gRPC stream. Each relayed worker is held to the rules of its own Attach
// stream (its hello with the job's token first; heartbeats; rendezvous
// answered to it); the stream batches both ways: a HostMessage's heartbeats
// reach the job's loop in one post, and what is queued for the host's workers
// while a write is in flight goes out in one HostDaemonMessage (HostOutbox).
// When the stream ends, each of its workers is detached as if its own stream
// had ended: the liveness rules then judge it as any detached worker.
#pragma once

#include <grpcpp/grpcpp.h>

#include "daemon/auth/auth_policy.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/rpc/client_stream_limiter.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class HeartbeatSchedule;

// A reactor for one AttachHost call; it deletes itself when the call is
// done. `jobs`, `access`, `limits` and `heartbeats` (may be null: no
// interval announced) outlive it; `slot` counts it against its client.
grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* NewHostStream(
    grpc::CallbackServerContext* context, JobManager* jobs, AccessPolicy* access,
    const DaemonLimits* limits, const HeartbeatSchedule* heartbeats,
    ClientStreamLimiter::Slot slot);

}  // namespace horovodd::daemon
