// The elastic training loop of the example: data-parallel SGD over the linear
// model, inside horovodd::elastic::Run, so that workers can join, leave or die
// mid-epoch without a sample being skipped or processed twice.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "train_result.h"

namespace horovodd::examples {

struct TrainOptions {
  int64_t epochs = 3;
  int64_t samples = 4096;
  int64_t batch_size = 64;   // global: split across the ranks of each step
  int64_t commit_every = 4;  // steps between commits (also at each epoch end)
  double learning_rate = 0.1;
  uint64_t seed = 1;
  int64_t step_delay_ms = 0;  // sleep per step, so membership can change mid-run
  // "cpu", or "cuda": each step's gradient sums are allreduced as a tensor on
  // GPU LocalRank() (NCCL, or staged through Gloo, per HOROVOD_GPU_OPERATIONS).
  std::string device = "cpu";
  // When set, training also ends at the first epoch boundary after this file
  // exists (rank 0 looks; every rank stops at the same epoch), so a test can
  // train through a scenario of its own length and then end the job.
  std::string stop_file;
};

// Trains to the end (options.epochs, or the epoch the stop file ended it at)
// and returns what this rank saw. Requires horovodd::Init().
// Prints "rank R/S generation G pid P" on every (re)start and, on rank 0, one
// "epoch E/N loss L size S" line per epoch.
absl::StatusOr<TrainResult> TrainElastic(const TrainOptions& options);

}  // namespace horovodd::examples
