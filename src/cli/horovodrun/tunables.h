// Horovod's tunables: the settings (--fusion-threshold-mb, --autotune, --no-stall-check, ...
// and their --config-file keys) whose whole effect is a variable in every worker's
// environment, named and valued as Horovod 0.28's launcher sets it
// (horovod/runner/common/util/config_parser.py, set_env_from_args): HOROVOD_FUSION_THRESHOLD
// in bytes, HOROVOD_HIERARCHICAL_ALLREDUCE=1, HOROVOD_STALL_CHECK_DISABLE=1, ...
//
// Each is accepted, as a Horovod job script must not fail on one; those that nothing here
// acts on yet (or that only MPI would) earn one warning line naming the setting.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/horovodrun/config_file.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

// Checks each tunable in `settings` as Horovod does (whole numbers >= 0, the Gaussian noise
// in [0, 1], on/off values) and puts its variable into spec->env(), over one of the same name
// already there. Appends to `warnings` one line per setting that has no effect here.
// INVALID_ARGUMENT naming the setting and its value otherwise.
absl::Status ReadTunables(const RawSettings& settings, v1::JobSpec* spec,
                          std::vector<std::string>* warnings);

}  // namespace horovodd::cli
