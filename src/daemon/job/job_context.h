// What the daemon gives each job: its id and worker token, how its workers
// reach the daemon, the launcher and observer all jobs share, the limits of
// its key-value namespace and the clock it runs on. JobManager fills one in
// per job; the driver and its parts (WorkerStarter, JobCheckpointer) read it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "daemon/decision_gate/decision_gate.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/kv_namespace/kv_namespace.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"

namespace horovodd::daemon {

struct JobContext {
  std::string job_id;
  std::string daemon_address;       // what workers dial, host:port
  Launcher* launcher;               // shared by all jobs, outlives them
  JobObserver* observer = nullptr;  // daemon-wide; outlives the job; may be null
  // The job's own secret (256 random bits, hex), handed to its workers in
  // HOROVODD_WORKER_TOKEN; opens this job's WorkerService calls and nothing
  // else. Never in the spec, the status, the journal or a log.
  std::string worker_token;
  // Set for every worker by the daemon (its TLS settings: HOROVODD_TLS_*).
  std::map<std::string, std::string> worker_env;
  // What the job's key-value namespace may hold (config limits.max_kv_*).
  KvLimits kv_limits;
  // What the job reads time from and its loop waits on; outlives the job.
  const Clock* clock = &RealClock();
  // Write JobCheckpoints to the observer (a daemon that takes jobs back
  // after a restart); off, nothing is computed for them.
  bool checkpoints = false;
  // The submission's SubmitJobRequest.client_request_id ("" for none),
  // shown in the job's status.
  std::string client_request_id;
  // Whether the job may act on processes and membership now (a leader that
  // cannot renew its etcd lease holds them); null: always.
  std::shared_ptr<DecisionGate> gate;
};

}  // namespace horovodd::daemon
