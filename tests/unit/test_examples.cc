// The elastic example's pieces without a job: the sampler hands out every
// sample exactly once per epoch whatever the group sizes, the model converges
// when ranks' gradient sums are added up, the result file is what the demo
// and the integration tests parse, and the built elastic_train rejects bad
// flags by name. Training under a real job is the integration tests' part.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "elastic_sampler.h"
#include "linear_model.h"
#include "train_result.h"

namespace horovodd::examples {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs build/examples/elastic_train with `flags`, outside any job.
CommandResult RunElasticTrain(const std::string& flags) {
  const std::string command = std::string("env -u HOROVODD_DAEMON_ADDR -u HOROVODD_JOB_ID ") +
                              HVDD_BUILD_DIR + "/examples/elastic_train " + flags + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// Sums rank shares of one global batch the way allreduce(sum) would.
BatchSums GroupSums(const Dataset& data, const std::vector<double>& parameters,
                    const std::vector<int64_t>& permutation, int64_t offset, int64_t batch_size,
                    int size) {
  BatchSums total(data.parameters());
  for (int rank = 0; rank < size; ++rank) {
    BatchSums local(data.parameters());
    for (int64_t sample : RankShare(permutation, offset, batch_size, rank, size)) {
      local.Add(data, parameters, sample);
    }
    for (size_t i = 0; i < total.buffer().size(); ++i) total.buffer()[i] += local.buffer()[i];
  }
  return total;
}

TEST_CASE("EpochPermutation is a permutation that depends only on seed and epoch") {
  const std::vector<int64_t> permutation = EpochPermutation(1, 0, 1000);
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(permutation != identity);

  CHECK(EpochPermutation(1, 0, 1000) == permutation);
  CHECK(EpochPermutation(1, 1, 1000) != permutation);
  CHECK(EpochPermutation(2, 0, 1000) != permutation);
}

TEST_CASE("BatchLength is the batch size except for the epoch's last batch") {
  CHECK(BatchLength(100, 0, 32) == 32);
  CHECK(BatchLength(100, 96, 32) == 4);
  CHECK(BatchLength(100, 100, 32) == 0);
}

TEST_CASE("RankShare splits a batch among the ranks without overlap") {
  const std::vector<int64_t> permutation = EpochPermutation(7, 3, 50);
  for (int size = 1; size <= 6; ++size) {
    for (int64_t offset : {int64_t{0}, int64_t{40}}) {  // a full batch, then a short last one
      std::vector<int64_t> together;
      for (int rank = 0; rank < size; ++rank) {
        const std::vector<int64_t> share = RankShare(permutation, offset, 16, rank, size);
        together.insert(together.end(), share.begin(), share.end());
      }
      std::sort(together.begin(), together.end());
      const int64_t length = BatchLength(50, offset, 16);
      std::vector<int64_t> expected(permutation.begin() + offset,
                                    permutation.begin() + offset + length);
      std::sort(expected.begin(), expected.end());
      INFO("size " << size << " offset " << offset);
      CHECK(together == expected);
    }
  }
}

TEST_CASE("an epoch whose group size changes between steps covers each sample once") {
  const int64_t samples = 1000;
  const int64_t batch_size = 64;
  const std::vector<int64_t> permutation = EpochPermutation(1, 0, samples);
  const std::vector<int> sizes = {2, 2, 4, 4, 4, 3, 1, 5};  // one per step, then repeated

  std::vector<int> times_seen(samples, 0);
  int64_t offset = 0;
  for (size_t step = 0; offset < samples; ++step) {
    const int size = sizes[step % sizes.size()];
    for (int rank = 0; rank < size; ++rank) {
      for (int64_t sample : RankShare(permutation, offset, batch_size, rank, size)) {
        ++times_seen[sample];
      }
    }
    offset += BatchLength(samples, offset, batch_size);
  }
  CHECK(std::count(times_seen.begin(), times_seen.end(), 1) == samples);
}

TEST_CASE("MakeDataset is deterministic and exact at the true parameters without noise") {
  DatasetOptions options;
  options.samples = 200;
  options.noise_stddev = 0.0;
  const Dataset data = MakeDataset(options);
  CHECK(data.samples() == 200);
  CHECK(data.parameters() == 17);
  CHECK(MakeDataset(options).x == data.x);
  CHECK(MakeDataset(options).true_parameters == data.true_parameters);

  BatchSums sums(data.parameters());
  for (int64_t i = 0; i < data.samples(); ++i) sums.Add(data, data.true_parameters, i);
  CHECK(sums.count() == 200);
  CHECK(sums.loss() == Approx(0.0).margin(1e-20));
  for (int p = 0; p < data.parameters(); ++p) CHECK(sums.gradient(p) == Approx(0.0).margin(1e-9));
  CHECK(MeanLoss(data, data.true_parameters) == Approx(0.0).margin(1e-20));
}

TEST_CASE("ranks' gradient sums add up to the sums over the whole batch") {
  const Dataset data = MakeDataset(DatasetOptions{});
  const std::vector<double> parameters(data.parameters(), 0.25);
  const std::vector<int64_t> permutation = EpochPermutation(1, 0, data.samples());

  const BatchSums whole = GroupSums(data, parameters, permutation, 128, 64, 1);
  const BatchSums split = GroupSums(data, parameters, permutation, 128, 64, 3);
  CHECK(split.count() == 64);
  CHECK(split.loss() == Approx(whole.loss()));
  for (int p = 0; p < data.parameters(); ++p) CHECK(split.gradient(p) == Approx(whole.gradient(p)));
}

TEST_CASE("ApplySgd moves against the mean gradient and ignores an empty batch") {
  const Dataset data = MakeDataset(DatasetOptions{});
  std::vector<double> parameters(data.parameters(), 0.0);
  ApplySgd(BatchSums(data.parameters()), 0.1, &parameters);
  CHECK(parameters == std::vector<double>(data.parameters(), 0.0));

  BatchSums sums(data.parameters());
  sums.Add(data, parameters, 0);
  sums.Add(data, parameters, 1);
  ApplySgd(sums, 0.5, &parameters);
  for (int p = 0; p < data.parameters(); ++p) {
    CHECK(parameters[p] == Approx(-0.5 * sums.gradient(p) / 2.0));
  }
}

TEST_CASE("the default training converges whatever the group size at each step") {
  const Dataset data = MakeDataset(DatasetOptions{});
  std::vector<double> parameters(data.parameters(), 0.0);
  const double initial_error = ParameterDistance(parameters, data.true_parameters);
  const std::vector<int> sizes = {2, 4, 3, 1};
  int64_t step = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> permutation = EpochPermutation(1, epoch, data.samples());
    for (int64_t offset = 0; offset < data.samples(); offset += 64, ++step) {
      const int size = sizes[(step / 10) % sizes.size()];
      ApplySgd(GroupSums(data, parameters, permutation, offset, 64, size), 0.1, &parameters);
    }
  }
  CHECK(initial_error > 1.0);
  CHECK(ParameterDistance(parameters, data.true_parameters) < 0.01);
  CHECK(MeanLoss(data, parameters) < 1e-3);
}

TEST_CASE("ParameterDistance is the Euclidean distance") {
  CHECK(ParameterDistance({0.0, 0.0}, {3.0, 4.0}) == Approx(5.0));
  CHECK(ParameterDistance({1.5}, {1.5}) == 0.0);
}

TEST_CASE("ResultToJson names every field the demo and tests read") {
  TrainResult result;
  result.epochs_completed = 3;
  result.samples_per_epoch = {4096, 4096, 4096};
  result.resets = 2;
  result.final_size = 4;
  result.weight_error = 0.0042;
  result.steps = 192;
  const std::string json = ResultToJson(result);
  CHECK(json.find("\"epochs_completed\": 3") != std::string::npos);
  CHECK(json.find("\"samples_per_epoch\": [4096, 4096, 4096]") != std::string::npos);
  CHECK(json.find("\"resets\": 2") != std::string::npos);
  CHECK(json.find("\"final_size\": 4") != std::string::npos);
  CHECK(json.find("\"weight_error\": 0.0042") != std::string::npos);
  CHECK(json.find("\"steps\": 192") != std::string::npos);

  result.weight_error = std::numeric_limits<double>::quiet_NaN();
  CHECK(ResultToJson(result).find("\"weight_error\": null") != std::string::npos);
}

TEST_CASE("WriteResultFile writes the JSON, and names the path it cannot write") {
  char directory_template[] = "/tmp/hvdd_examples_test.XXXXXX";
  const char* directory = mkdtemp(directory_template);
  REQUIRE(directory != nullptr);
  const std::string path = std::string(directory) + "/result.json";

  TrainResult result;
  result.samples_per_epoch = {10};
  REQUIRE(WriteResultFile(path, result).ok());
  std::ifstream in(path);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(written == ResultToJson(result));
  CHECK(access((path + ".tmp").c_str(), F_OK) != 0);

  const std::string unwritable = std::string(directory) + "/missing/result.json";
  const absl::Status status = WriteResultFile(unwritable, result);
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(status.message()).find(unwritable) != std::string::npos);

  unlink(path.c_str());
  rmdir(directory);
}

TEST_CASE("elastic_train --help lists its flags and exits 0") {
  const CommandResult help = RunElasticTrain("--help");
  CHECK(help.exit_code == 0);
  for (const char* flag : {"--epochs", "--samples", "--batch-size", "--commit-every", "--lr",
                           "--seed", "--step-delay-ms", "--output", "--stop-file"}) {
    CHECK(help.output.find(flag) != std::string::npos);
  }
}

TEST_CASE("elastic_train rejects bad flags with exit 1, naming the flag and value") {
  struct Case {
    const char* flags;
    const char* message;
  };
  const Case cases[] = {
      {"--epochs 0", "--epochs must be at least 1, got 0"},
      {"--batch-size -4", "--batch-size must be at least 1, got -4"},
      {"--commit-every 0", "--commit-every must be at least 1, got 0"},
      {"--lr -0.5", "--lr must be a positive number, got -0.5"},
      {"--step-delay-ms -1", "--step-delay-ms must be 0 or more, got -1"},
      {"--samples many", "--samples"},
      {"--no-such-flag", "--no-such-flag"},
  };
  for (const Case& c : cases) {
    INFO("flags: " << c.flags);
    const CommandResult result = RunElasticTrain(c.flags);
    CHECK(result.exit_code == 1);
    CHECK(result.output.find(c.message) != std::string::npos);
  }
}

TEST_CASE("elastic_train outside a job exits 1 with the reason on stderr") {
  const CommandResult result = RunElasticTrain("--epochs 1");
  CHECK(result.exit_code == 1);
  CHECK(result.output.rfind("elastic_train: ", 0) == 0);
}

}  // namespace
}  // namespace horovodd::examples
