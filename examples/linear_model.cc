#include "linear_model.h"

#include <cmath>
#include <random>

namespace horovodd::examples {

double Dataset::Predict(const std::vector<double>& parameters, int64_t sample) const {
  const double* row = &x[static_cast<size_t>(sample) * features];
  double prediction = parameters[features];  // the bias
  for (int f = 0; f < features; ++f) prediction += parameters[f] * row[f];
  return prediction;
}

Dataset MakeDataset(const DatasetOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> parameter_dist(-1.0, 1.0);
  std::normal_distribution<double> feature_dist(0.0, 1.0);
  std::normal_distribution<double> noise_dist(0.0, options.noise_stddev);

  Dataset data;
  data.features = options.features;
  data.true_parameters.resize(options.features + 1);
  for (double& p : data.true_parameters) p = parameter_dist(rng);

  data.x.resize(static_cast<size_t>(options.samples) * options.features);
  for (double& v : data.x) v = feature_dist(rng);
  data.y.resize(options.samples);
  for (int64_t i = 0; i < options.samples; ++i) {
    data.y[i] = data.Predict(data.true_parameters, i) + noise_dist(rng);
  }
  return data;
}

BatchSums::BatchSums(int parameters) : values_(parameters + 2, 0.0) {}

void BatchSums::Add(const Dataset& data, const std::vector<double>& parameters, int64_t sample) {
  const double residual = data.Predict(parameters, sample) - data.y[sample];
  const double* row = &data.x[static_cast<size_t>(sample) * data.features];
  for (int f = 0; f < data.features; ++f) values_[f] += residual * row[f];
  values_[data.features] += residual;  // d/db
  values_[data.parameters()] += 0.5 * residual * residual;
  values_[data.parameters() + 1] += 1.0;
}

int64_t BatchSums::count() const { return std::llround(values_.back()); }

void ApplySgd(const BatchSums& sums, double learning_rate, std::vector<double>* parameters) {
  const int64_t count = sums.count();
  if (count == 0) return;
  for (int p = 0; p < sums.parameters(); ++p) {
    (*parameters)[p] -= learning_rate * sums.gradient(p) / static_cast<double>(count);
  }
}

double MeanLoss(const Dataset& data, const std::vector<double>& parameters) {
  BatchSums sums(data.parameters());
  for (int64_t i = 0; i < data.samples(); ++i) sums.Add(data, parameters, i);
  return sums.count() == 0 ? 0.0 : sums.loss() / static_cast<double>(sums.count());
}

double ParameterDistance(const std::vector<double>& a, const std::vector<double>& b) {
  double squared = 0.0;
  for (size_t i = 0; i < a.size(); ++i) squared += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(squared);
}

}  // namespace horovodd::examples
