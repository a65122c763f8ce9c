// The model the elastic example trains: linear regression on synthetic data.
// Every rank builds the same data set from the same seed, so no data moves
// between workers; only gradient sums do.
#pragma once

#include <cstdint>
#include <vector>

namespace horovodd::examples {

struct DatasetOptions {
  int64_t samples = 4096;
  int features = 16;
  uint64_t seed = 1;
  double noise_stddev = 0.01;
};

// y = w.x + b + noise, with x ~ N(0, 1) and known true parameters.
// Parameters are laid out as [w_0 .. w_{features-1}, b] everywhere.
struct Dataset {
  int features = 0;
  std::vector<double> x;  // samples x features, row-major
  std::vector<double> y;
  std::vector<double> true_parameters;  // features + 1 values

  int64_t samples() const { return static_cast<int64_t>(y.size()); }
  int parameters() const { return features + 1; }
  double Predict(const std::vector<double>& parameters, int64_t sample) const;
};

// Deterministic for given options: the same on every rank and every run.
Dataset MakeDataset(const DatasetOptions& options);

// Sums of the squared-error loss 1/2 (prediction - y)^2 and its gradient over
// some samples. Laid out flat, [gradient..., loss, count], so that one
// allreduce(sum) over buffer() combines the sums of all ranks.
class BatchSums {
 public:
  explicit BatchSums(int parameters);

  void Add(const Dataset& data, const std::vector<double>& parameters, int64_t sample);

  std::vector<double>& buffer() { return values_; }
  int parameters() const { return static_cast<int>(values_.size()) - 2; }
  double gradient(int parameter) const { return values_[parameter]; }
  double loss() const { return values_[parameters()]; }
  int64_t count() const;

 private:
  std::vector<double> values_;
};

// One SGD step with the mean gradient of `sums`; no change when it is empty.
void ApplySgd(const BatchSums& sums, double learning_rate, std::vector<double>* parameters);

// Mean of 1/2 (prediction - y)^2 over the whole data set.
double MeanLoss(const Dataset& data, const std::vector<double>& parameters);

// Euclidean distance between two parameter vectors of the same length.
double ParameterDistance(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace horovodd::examples
