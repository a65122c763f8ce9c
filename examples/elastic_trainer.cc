#include "elastic_trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "elastic_sampler.h"
#include "horovodd/device_tensor.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"
#include "linear_model.h"

namespace horovodd::examples {
namespace {

constexpr int kFeatures = 16;

// Everything that must survive a membership change. The fields are owned by
// the training thread; elastic::BufferState saves, restores and broadcasts
// them through the pointers registered in Register().
struct TrainingState {
  std::vector<double> parameters;
  std::vector<int64_t> samples_per_epoch;
  int64_t epoch = 0;
  int64_t offset = 0;  // samples of this epoch's permutation already processed
  int64_t step = 0;

  void Register(elastic::BufferState* state) {
    state->AddBuffer("parameters", &parameters);
    for (size_t e = 0; e < samples_per_epoch.size(); ++e) {
      state->AddValue("samples_epoch_" + std::to_string(e), &samples_per_epoch[e]);
    }
    state->AddValue("epoch", &epoch);
    state->AddValue("offset", &offset);
    state->AddValue("step", &step);
  }
};

// The line tests and the demo look for to follow membership and find PIDs.
void PrintMembership() {
  std::printf("rank %d/%d generation %lld pid %d\n", Rank(), Size(),
              static_cast<long long>(Generation()), static_cast<int>(getpid()));
  std::fflush(stdout);
}

// Sums `values` over all ranks, as a tensor on the device --device names.
absl::Status AllreduceSums(const TrainOptions& options, const AllreduceOptions& sum,
                           std::vector<double>& values) {
  if (options.device == "cpu") return Allreduce(ViewOf(values), sum);
  absl::StatusOr<DeviceTensor> on_gpu = DeviceTensor::FromHost(ViewOf(values), LocalRank());
  if (!on_gpu.ok()) return on_gpu.status();
  if (absl::Status status = Allreduce(on_gpu->view(), sum); !status.ok()) return status;
  return on_gpu->CopyToHost(ViewOf(values));
}

// One global batch: this rank's gradient sums, summed over all ranks, then
// the same SGD update everywhere.
absl::Status TrainStep(const TrainOptions& options, const Dataset& data,
                       const std::vector<int64_t>& permutation, TrainingState& training) {
  BatchSums sums(data.parameters());
  for (int64_t sample :
       RankShare(permutation, training.offset, options.batch_size, Rank(), Size())) {
    sums.Add(data, training.parameters, sample);
  }
  if (options.step_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options.step_delay_ms));
  }
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  sum.name = "batch_sums";
  if (absl::Status status = AllreduceSums(options, sum, sums.buffer()); !status.ok()) {
    return status;
  }
  ApplySgd(sums, options.learning_rate, &training.parameters);
  training.offset += BatchLength(options.samples, training.offset, options.batch_size);
  training.samples_per_epoch[training.epoch] += sums.count();
  ++training.step;
  return absl::OkStatus();
}

// Whether rank 0 sees the stop file; the same answer on every rank.
absl::StatusOr<bool> StopRequested(const TrainOptions& options) {
  std::vector<double> seen = {Rank() == 0 && access(options.stop_file.c_str(), F_OK) == 0 ? 1.0
                                                                                          : 0.0};
  AllreduceOptions max;
  max.op = ReduceOp::kMax;
  max.name = "stop_file";
  if (absl::Status status = Allreduce(ViewOf(seen), max); !status.ok()) return status;
  return seen[0] > 0;
}

}  // namespace

absl::StatusOr<TrainResult> TrainElastic(const TrainOptions& options) {
  DatasetOptions dataset_options;
  dataset_options.samples = options.samples;
  dataset_options.features = kFeatures;
  dataset_options.seed = options.seed;
  const Dataset data = MakeDataset(dataset_options);

  TrainingState training;
  training.parameters.assign(data.parameters(), 0.0);
  training.samples_per_epoch.assign(options.epochs, 0);
  elastic::BufferState state;
  training.Register(&state);

  absl::Status status = elastic::Run(state, [&](elastic::State& elastic_state) -> absl::Status {
    PrintMembership();
    while (training.epoch < options.epochs) {
      // Depends on (seed, epoch) only: the same on every rank and after any reset.
      const std::vector<int64_t> permutation =
          EpochPermutation(options.seed, training.epoch, options.samples);
      while (training.offset < options.samples) {
        if (absl::Status step = TrainStep(options, data, permutation, training); !step.ok()) {
          return step;
        }
        // The epoch's last step is committed below, once the epoch is closed.
        if (training.offset < options.samples && training.step % options.commit_every == 0) {
          if (absl::Status commit = elastic_state.Commit(); !commit.ok()) return commit;
        }
      }
      if (Rank() == 0) {
        std::printf(
            "epoch %lld/%lld loss %.6g size %d\n", static_cast<long long>(training.epoch + 1),
            static_cast<long long>(options.epochs), MeanLoss(data, training.parameters), Size());
        std::fflush(stdout);
      }
      ++training.epoch;
      training.offset = 0;
      if (absl::Status commit = elastic_state.Commit(); !commit.ok()) return commit;
      if (!options.stop_file.empty()) {
        absl::StatusOr<bool> stop = StopRequested(options);
        if (!stop.ok()) return stop.status();
        if (*stop) break;
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;

  TrainResult result;
  result.epochs_completed = training.epoch;
  result.samples_per_epoch.assign(training.samples_per_epoch.begin(),
                                  training.samples_per_epoch.begin() + training.epoch);
  result.resets = state.resets();
  result.final_size = Size();
  result.weight_error = ParameterDistance(training.parameters, data.true_parameters);
  result.steps = training.step;
  return result;
}

}  // namespace horovodd::examples
