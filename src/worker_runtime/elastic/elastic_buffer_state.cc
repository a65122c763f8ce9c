// elastic::BufferState: named float/double buffers and integer values the
// caller owns, saved aside at each commit and broadcast after each reset.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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

int64_t HashLengths(const std::vector<int64_t>& lengths) {
  std::vector<std::string> texts;
  texts.reserve(lengths.size());
  for (int64_t length : lengths) texts.push_back(std::to_string(length));
  return HashNames(texts);
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
  HVDD_RETURN_IF_ERROR(Allreduce(ViewOf(both), options));
  const size_t n = values.size();
  max->assign(both.begin(), both.begin() + n);
  min->clear();
  for (size_t i = 0; i < n; ++i) min->push_back(-both[n + i]);
  return absl::OkStatus();
}

// Buffers up to this size travel together in one broadcast (with the
// values); bigger ones are broadcast in place, one each, to spare a copy.
// After a reset each collective is one more trip around a fresh ring that
// every rank waits for, so a small state should cost one.
constexpr size_t kPackedBytesLimit = size_t{1} << 20;

// Sorts non-empty buffers into those packed into the one broadcast (their
// bytes) and those broadcast in place.
template <typename T>
void CollectSmall(const std::map<std::string, std::vector<T>*>& buffers,
                  std::vector<std::pair<void*, size_t>>* small,
                  std::vector<std::vector<T>*>* large) {
  for (const auto& [name, buffer] : buffers) {
    const size_t bytes = buffer->size() * sizeof(T);
    if (bytes == 0) continue;
    if (bytes > kPackedBytesLimit) {
      large->push_back(buffer);
    } else {
      small->emplace_back(buffer->data(), bytes);
    }
  }
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
  if (absl::StatusOr<int64_t> checked = CheckLayout(0); !checked.ok()) return checked.status();
  return BroadcastFrom(root);
}

absl::StatusOr<int64_t> BufferState::SyncFromNewest(int64_t commits) {
  // The choice rides in the layout check as one number whose maximum is the
  // most commits, then the lowest rank: commits above, (kRanks - 1 - rank)
  // below.
  // Every rank must take the same path, so only the size picks State's
  // way; a count past 2^42 (never in practice) saturates rather than
  // sending one rank elsewhere.
  constexpr int64_t kRankBits = 20;
  constexpr int64_t kRanks = int64_t{1} << kRankBits;
  if (Size() > kRanks) return State::SyncFromNewest(commits);
  const int64_t counted = std::clamp<int64_t>(commits, 0, (int64_t{1} << (62 - kRankBits)) - 1);
  HVDD_ASSIGN_OR_RETURN(int64_t newest,
                        CheckLayout((counted << kRankBits) | (kRanks - 1 - Rank())));
  const int root = static_cast<int>(kRanks - 1 - (newest & (kRanks - 1)));
  HVDD_RETURN_IF_ERROR(BroadcastFrom(root));
  return newest >> kRankBits;
}

absl::StatusOr<int64_t> BufferState::CheckLayout(int64_t extra) {
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

  // One collective checks names and lengths (through a hash of the
  // lengths); only when they differ does a second one find which buffer.
  std::vector<int64_t> min, max;
  const std::vector<int64_t> shape = {static_cast<int64_t>(names.size()), HashNames(names),
                                      HashLengths(lengths), extra};
  HVDD_RETURN_IF_ERROR(MinMaxAcrossRanks(shape, &min, &max));
  if (min[0] != max[0] || min[1] != max[1]) {
    return absl::InvalidArgumentError(
        "elastic state differs across ranks: they registered different buffer or value names");
  }
  if (min[2] != max[2]) {
    HVDD_RETURN_IF_ERROR(MinMaxAcrossRanks(lengths, &min, &max));
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (min[i] != max[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "elastic state buffer '", names[i].substr(2), "' has different lengths across ranks (",
            min[i], " to ", max[i], " elements); buffers must have the same length on every rank"));
      }
    }
  }
  return max[3];
}

absl::Status BufferState::BroadcastFrom(int root) {
  // The layout is the same everywhere, so every rank splits it the same way.
  std::vector<std::pair<void*, size_t>> small;
  std::vector<std::vector<float>*> large_floats;
  std::vector<std::vector<double>*> large_doubles;
  CollectSmall(float_buffers_, &small, &large_floats);
  CollectSmall(double_buffers_, &small, &large_doubles);
  for (std::vector<float>* buffer : large_floats) {
    HVDD_RETURN_IF_ERROR(Broadcast(ViewOf(*buffer), root));
  }
  for (std::vector<double>* buffer : large_doubles) {
    HVDD_RETURN_IF_ERROR(Broadcast(ViewOf(*buffer), root));
  }
  for (const auto& [name, value] : values_) small.emplace_back(value, sizeof(int64_t));
  size_t total = 0;
  for (const auto& [data, bytes] : small) total += bytes;
  if (total == 0) return absl::OkStatus();
  std::vector<uint8_t> packed(total);
  size_t offset = 0;
  for (const auto& [data, bytes] : small) {
    std::memcpy(packed.data() + offset, data, bytes);
    offset += bytes;
  }
  HVDD_RETURN_IF_ERROR(Broadcast(ViewOf(packed), root));
  offset = 0;
  for (const auto& [data, bytes] : small) {
    std::memcpy(data, packed.data() + offset, bytes);
    offset += bytes;
  }
  return absl::OkStatus();
}

}  // namespace horovodd::elastic
