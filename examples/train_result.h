// What the elastic example reports when training ends: the JSON file that
// rank 0 writes for --output, read by the demo and the integration tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace horovodd::examples {

struct TrainResult {
  int64_t epochs_completed = 0;
  // Samples the group processed in each epoch; every entry equals the data set
  // size when no sample was skipped or repeated across membership changes.
  std::vector<int64_t> samples_per_epoch;
  int resets = 0;             // resets this rank went through (State::resets())
  int final_size = 0;         // workers in the last generation
  double weight_error = 0.0;  // distance between learned and true parameters
  int64_t steps = 0;
};

// One JSON object with the fields above under the same names.
std::string ResultToJson(const TrainResult& result);

// Writes ResultToJson to `path` atomically (a temporary file, then rename), so
// a reader never sees half a result.
absl::Status WriteResultFile(const std::string& path, const TrainResult& result);

}  // namespace horovodd::examples
