// The job spec the daemon's unit tests submit: one worker on localhost running
// `argv`, with timeouts generous enough for a loaded machine.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "horovodd.pb.h"

namespace horovodd::testing {

inline v1::JobSpec OneLocalWorkerSpec(std::vector<std::string> argv) {
  v1::JobSpec spec;
  for (auto& arg : argv) spec.add_argv(std::move(arg));
  spec.set_num_proc(1);
  spec.set_min_np(1);
  spec.set_max_np(1);
  auto* host = spec.mutable_discovery()->add_hosts();
  host->set_host("localhost");
  host->set_slots(1);
  spec.mutable_discovery()->set_default_slots(1);
  spec.mutable_discovery()->set_interval_seconds(1);
  spec.mutable_discovery()->set_script_timeout_seconds(10);
  spec.set_elastic_timeout_seconds(60);
  spec.set_start_timeout_seconds(60);
  spec.set_liveness_timeout_seconds(60);
  spec.set_blacklist_cooldown_min_seconds(1);
  spec.set_blacklist_cooldown_max_seconds(2);
  return spec;
}

}  // namespace horovodd::testing
