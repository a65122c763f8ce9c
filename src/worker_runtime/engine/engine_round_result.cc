#include "worker_runtime/engine/engine_round_result.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace horovodd::internal {
namespace {

// Appends to `out` while there is room; `fits` turns false at the first
// write that would not.
class Writer {
 public:
  explicit Writer(absl::Span<uint8_t> out) : out_(out) {}

  template <typename T>
  void Value(T value) {
    Bytes(&value, sizeof(value));
  }
  void Count(size_t count) { Value(static_cast<uint32_t>(count)); }
  void Field(const std::string& field) {
    Count(field.size());
    Bytes(field.data(), field.size());
  }

  bool fits() const { return fits_; }
  size_t written() const { return at_; }

 private:
  void Bytes(const void* data, size_t bytes) {
    if (!fits_ || out_.size() - at_ < bytes) {
      fits_ = false;
      return;
    }
    if (bytes > 0) std::memcpy(out_.data() + at_, data, bytes);
    at_ += bytes;
  }

  absl::Span<uint8_t> out_;
  size_t at_ = 0;
  bool fits_ = true;
};

// Reads what Writer wrote; `ok` turns false at the first read past the end.
class Reader {
 public:
  explicit Reader(absl::Span<const uint8_t> in) : in_(in) {}

  template <typename T>
  T Value() {
    T value{};
    if (!Take(sizeof(value))) return value;
    std::memcpy(&value, in_.data() + at_ - sizeof(value), sizeof(value));
    return value;
  }
  // A count of items at least `min_item_bytes` each: one the rest of the
  // bytes cannot hold is a misread, not a reason to reserve gigabytes.
  size_t Count(size_t min_item_bytes) {
    const size_t count = Value<uint32_t>();
    if (ok_ && count > (in_.size() - at_) / min_item_bytes) ok_ = false;
    return ok_ ? count : 0;
  }
  std::string Field() {
    const size_t bytes = Value<uint32_t>();
    if (!Take(bytes)) return std::string();
    return std::string(reinterpret_cast<const char*>(in_.data() + at_ - bytes), bytes);
  }

  bool ok() const { return ok_; }
  bool at_end() const { return at_ == in_.size(); }

 private:
  bool Take(size_t bytes) {
    if (!ok_ || in_.size() - at_ < bytes) {
      ok_ = false;
      return false;
    }
    at_ += bytes;
    return true;
  }

  absl::Span<const uint8_t> in_;
  size_t at_ = 0;
  bool ok_ = true;
};

constexpr size_t kFieldBytes = sizeof(uint32_t);  // an empty field

}  // namespace

std::optional<size_t> EncodeRoundResult(const NegotiationResult& result,
                                        const std::vector<Announcement>& cached,
                                        absl::Span<uint8_t> out) {
  Writer w(out);
  w.Value<int64_t>(result.fusion_threshold);
  w.Count(cached.size());
  for (const Announcement& a : cached) {
    w.Field(a.first);
    w.Field(a.second);
  }
  w.Count(result.ready.size());
  for (const std::string& name : result.ready) w.Field(name);
  w.Count(result.conflicts.size());
  for (const Conflict& c : result.conflicts) {
    w.Field(c.name);
    w.Field(c.message);
  }
  w.Count(result.joined.size());
  for (int rank : result.joined) w.Value<int32_t>(rank);
  w.Count(result.ready_descriptors.size());
  for (const std::string& d : result.ready_descriptors) w.Field(d);
  w.Count(result.waiting.size());
  for (const auto& [name, missing] : result.waiting) {
    w.Field(name);
    w.Count(missing.size());
    for (int rank : missing) w.Value<int32_t>(rank);
  }
  if (!w.fits()) return std::nullopt;
  return w.written();
}

absl::StatusOr<NegotiationResult> ApplyRoundResult(absl::Span<const uint8_t> encoded,
                                                   ResponseCache& cache) {
  Reader r(encoded);
  NegotiationResult result;
  result.fusion_threshold = r.Value<int64_t>();
  std::vector<Announcement> cached(r.Count(2 * kFieldBytes));
  for (Announcement& a : cached) {
    a.first = r.Field();
    a.second = r.Field();
  }
  result.ready.resize(r.Count(kFieldBytes));
  for (std::string& name : result.ready) name = r.Field();
  result.conflicts.resize(r.Count(2 * kFieldBytes));
  for (Conflict& c : result.conflicts) {
    c.name = r.Field();
    c.message = r.Field();
  }
  result.joined.resize(r.Count(sizeof(int32_t)));
  for (int& rank : result.joined) rank = r.Value<int32_t>();
  result.ready_descriptors.resize(r.Count(kFieldBytes));
  for (std::string& d : result.ready_descriptors) d = r.Field();
  const size_t waiting = r.Count(2 * kFieldBytes);
  for (size_t i = 0; i < waiting && r.ok(); ++i) {
    std::string name = r.Field();
    std::vector<int> missing(r.Count(sizeof(int32_t)));
    for (int& rank : missing) rank = r.Value<int32_t>();
    result.waiting.emplace(std::move(name), std::move(missing));
  }
  if (!r.ok() || !r.at_end()) {
    return absl::DataLossError(
        "negotiation: the round's result from the deciding rank does not parse");
  }
  for (const Announcement& a : cached) cache.Record(a.first, a.second);
  return result;
}

}  // namespace horovodd::internal
