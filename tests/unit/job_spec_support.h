// The job specs the daemon's tests submit: workers on localhost running
// `argv`, with timeouts generous enough for a loaded machine.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "horovodd.pb.h"

namespace horovodd::testing {

// `np` workers on localhost running `argv` (slots for `max_np` when more),
// with timeouts generous enough for a loaded machine. max_np 0: unset.
inline v1::JobSpec LocalJobSpec(std::vector<std::string> argv, int np, int min_np, int max_np) {
  v1::JobSpec spec;
  for (auto& arg : argv) spec.add_argv(std::move(arg));
  spec.set_num_proc(np);
  spec.set_min_np(min_np);
  if (max_np > 0) spec.set_max_np(max_np);
  auto* host = spec.mutable_discovery()->add_hosts();
  host->set_host("localhost");
  host->set_slots(std::max(1, std::max(np, max_np)));
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

// One worker on localhost running `argv`.
inline v1::JobSpec OneLocalWorkerSpec(std::vector<std::string> argv) {
  return LocalJobSpec(std::move(argv), 1, 1, 1);
}

}  // namespace horovodd::testing
