// elastic::BufferState: named float/double buffers and integer values the
// caller owns, saved aside at each commit and broadcast after each reset.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"

namespace horovodd::elastic {
namespace {

template <typename Buffer>
void SaveAll(const std::map<std::string, Buffer*>& live, std::map<std::string, Buffer>& saved) {
  for (const auto& [name, buffer] : live) saved[name] = *buffer;
}

template <typename Buffer>
void RestoreAll(const std::map<std::string, Buffer*>& live,
                const std::map<std::string, Buffer>& saved) {
  for (const auto& [name, buffer] : live) {
    auto it = saved.find(name);
    if (it != saved.end()) *buffer = it->second;
  }
}

// FNV-1a, so every process (whatever its standard library) gets the same
// number for the same names. Kept below 2^62 so it can be negated.
int64_t HashNames(const std::vector<std::string>& names) {
  uint64_t hash = 1469598103934665603ull;
  for (const auto& name : names) {
    for (unsigned char c : name + '\0') {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  }
  return static_cast<int64_t>(hash >> 2);
}

// Allreduces [v..., -v...] with max: every rank learns, for each entry, the
// largest and the smallest value any rank has, so all agree on a mismatch.
absl::Status MinMaxAcrossRanks(const std::vector<int64_t>& values, std::vector<int64_t>* min,
                               std::vector<int64_t>* max) {
  std::vector<int64_t> both(values);
  for (int64_t v : values) both.push_back(-v);
  AllreduceOptions options;
  options.op = ReduceOp::kMax;
  options.name = "elastic.state_layout";
  if (absl::Status status = Allreduce(ViewOf(both), options); !status.ok()) return status;
  const size_t n = values.size();
  max->assign(both.begin(), both.begin() + n);
  min->clear();
  for (size_t i = 0; i < n; ++i) min->push_back(-both[n + i]);
  return absl::OkStatus();
}

template <typename T>
absl::Status BroadcastAll(const std::map<std::string, std::vector<T>*>& buffers, int root) {
  for (const auto& [name, buffer] : buffers) {
    if (buffer->empty()) continue;
    if (absl::Status status = Broadcast(ViewOf(*buffer), root); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

void BufferState::AddBuffer(const std::string& name, std::vector<float>* buffer) {
  float_buffers_[name] = buffer;
}

void BufferState::AddBuffer(const std::string& name, std::vector<double>* buffer) {
  double_buffers_[name] = buffer;
}

void BufferState::AddValue(const std::string& name, int64_t* value) { values_[name] = value; }

void BufferState::Save() {
  SaveAll(float_buffers_, saved_floats_);
  SaveAll(double_buffers_, saved_doubles_);
  SaveAll(values_, saved_values_);
}

void BufferState::Restore() {
  RestoreAll(float_buffers_, saved_floats_);
  RestoreAll(double_buffers_, saved_doubles_);
  RestoreAll(values_, saved_values_);
}

absl::Status BufferState::Sync(int root) {
  if (root < 0 || root >= Size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync root ", root, " is not a rank of a job of size ", Size()));
  }
  // Every rank checks the layout with the same collectives before any data
  // moves, so a mismatch fails on all ranks instead of hanging some.
  std::vector<std::string> names;
  std::vector<int64_t> lengths;
  for (const auto& [name, buffer] : float_buffers_) {
    names.push_back("f:" + name);
    lengths.push_back(static_cast<int64_t>(buffer->size()));
  }
  for (const auto& [name, buffer] : double_buffers_) {
    names.push_back("d:" + name);
    lengths.push_back(static_cast<int64_t>(buffer->size()));
  }
  for (const auto& [name, value] : values_) names.push_back("v:" + name);

  std::vector<int64_t> min, max;
  const std::vector<int64_t> shape = {static_cast<int64_t>(names.size()), HashNames(names)};
  if (absl::Status status = MinMaxAcrossRanks(shape, &min, &max); !status.ok()) return status;
  if (min != max) {
    return absl::InvalidArgumentError(
        "elastic state differs across ranks: they registered different buffer or value names");
  }
  if (absl::Status status = MinMaxAcrossRanks(lengths, &min, &max); !status.ok()) return status;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (min[i] != max[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "elastic state buffer '", names[i].substr(2), "' has different lengths across ranks (",
          min[i], " to ", max[i], " elements); buffers must have the same length on every rank"));
    }
  }

  if (absl::Status status = BroadcastAll(float_buffers_, root); !status.ok()) return status;
  if (absl::Status status = BroadcastAll(double_buffers_, root); !status.ok()) return status;
  if (values_.empty()) return absl::OkStatus();
  std::vector<int64_t> packed;
  for (const auto& [name, value] : values_) packed.push_back(*value);
  if (absl::Status status = Broadcast(ViewOf(packed), root); !status.ok()) return status;
  size_t i = 0;
  for (auto& [name, value] : values_) *value = packed[i++];
  return absl::OkStatus();
}

}  // namespace horovodd::elastic
