// elastic_train: the example elastic job. Linear regression on synthetic data,
// trained data-parallel by however many workers horovodd gives it at any
// moment. Run it under horovodrun; scripts/demo.sh does, and grows and
// shrinks the job while it trains.
//
// Exits 0 when training finished (rank 0 then writes the result JSON), 1 with
// the error on stderr otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "elastic_trainer.h"
#include "horovodd/horovodd.h"
#include "train_result.h"

namespace {

using horovodd::examples::TrainOptions;

// Checked here rather than with CLI11's validators, whose messages for these
// ranges print the largest double.
absl::Status CheckOptions(const TrainOptions& options) {
  const std::pair<const char*, int64_t> at_least_one[] = {
      {"--epochs", options.epochs},
      {"--samples", options.samples},
      {"--batch-size", options.batch_size},
      {"--commit-every", options.commit_every},
  };
  for (const auto& [flag, value] : at_least_one) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " must be at least 1, got ", value));
    }
  }
  if (!(options.learning_rate > 0.0) || !std::isfinite(options.learning_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr must be a positive number, got ", options.learning_rate));
  }
  if (options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or cuda, got '", options.device, "'"));
  }
  if (options.step_delay_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--step-delay-ms must be 0 or more, got ", options.step_delay_ms));
  }
  return absl::OkStatus();
}

absl::Status InitTrainAndReport(const TrainOptions& options, const std::string& output) {
  if (absl::Status init = horovodd::Init(); !init.ok()) return init;
  absl::StatusOr<horovodd::examples::TrainResult> result =
      horovodd::examples::TrainElastic(options);
  const bool write_output = result.ok() && !output.empty() && horovodd::Rank() == 0;
  horovodd::Shutdown();
  if (!result.ok()) return result.status();
  if (write_output) return horovodd::examples::WriteResultFile(output, *result);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  TrainOptions options;
  std::string output;

  CLI::App app{"Elastic data-parallel linear regression on synthetic data (a horovodd example)."};
  app.add_option("--epochs", options.epochs, "Passes over the data set")
      ->default_val(options.epochs);
  app.add_option("--samples", options.samples, "Size of the synthetic data set")
      ->default_val(options.samples);
  app.add_option("--batch-size", options.batch_size, "Global batch size, split across ranks")
      ->default_val(options.batch_size);
  app.add_option("--commit-every", options.commit_every, "Steps between elastic commits")
      ->default_val(options.commit_every);
  app.add_option("--lr", options.learning_rate, "SGD learning rate")
      ->default_val(options.learning_rate);
  app.add_option("--seed", options.seed, "Seed of the data set and the epoch permutations")
      ->default_val(options.seed);
  app.add_option("--step-delay-ms", options.step_delay_ms,
                 "Sleep per step, so that membership can change mid-run")
      ->default_val(options.step_delay_ms);
  app.add_option("--device", options.device,
                 "cpu, or cuda: allreduce the gradient sums as a GPU tensor")
      ->default_val(options.device);
  app.add_option("--output", output, "Rank 0 writes the result JSON here on success");
  app.add_option("--stop-file", options.stop_file,
                 "Also end at the first epoch boundary after this file exists");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help exits 0; any bad flag prints CLI11's message on stderr and exits 1.
    return app.exit(error) == 0 ? 0 : 1;
  }

  absl::Status status = CheckOptions(options);
  if (status.ok()) status = InitTrainAndReport(options, output);
  if (!status.ok()) {
    std::fprintf(stderr, "elastic_train: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
