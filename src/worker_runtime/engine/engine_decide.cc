#include "worker_runtime/engine/engine_decide.h"

#include <cstring>
#include <map>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace horovodd::internal {
namespace {

size_t BitsetBytes(size_t slots) { return (slots + 7) / 8; }

// Announcements: [u32 name size][name][u32 descriptor size][descriptor]...
void AppendField(std::string& out, const std::string& field) {
  const uint32_t size = static_cast<uint32_t>(field.size());
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out.append(field);
}

bool ReadField(const uint8_t* data, size_t bytes, size_t& at, std::string& field) {
  uint32_t size = 0;
  if (bytes - at < sizeof(size)) return false;
  std::memcpy(&size, data + at, sizeof(size));
  at += sizeof(size);
  if (bytes - at < size) return false;
  field.assign(reinterpret_cast<const char*>(data + at), size);
  at += size;
  return true;
}

std::string DescribeForMessage(const std::string& encoded) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  return d.ok() ? d->ToString() : std::string("an unreadable descriptor");
}

std::string ConflictMessage(absl::Span<const std::string* const> by_rank) {
  std::string message = "ranks enqueued it differently: ";
  // Name the first rank's request and the first that differs: enough to
  // find the bug. (Joined ranks may not have it: they are skipped.)
  size_t first = 0;
  while (by_rank[first] == nullptr) ++first;
  for (size_t r = first + 1; r < by_rank.size(); ++r) {
    if (by_rank[r] == nullptr || *by_rank[r] == *by_rank[first]) continue;
    absl::StrAppend(&message, "rank ", first, " has ", DescribeForMessage(*by_rank[first]),
                    ", rank ", r, " has ", DescribeForMessage(*by_rank[r]));
    break;
  }
  return message;
}

// Whether ranks that joined can take part in the request with zeros: a CPU
// allreduce (Horovod allows only allreduce while ranks have joined).
bool JoinedRanksMayStandIn(const std::string& encoded) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  return d.ok() && d->kind == RequestKind::kAllreduce;
}

std::string NotWithJoinedMessage(const std::string& encoded, const std::vector<int>& joined) {
  absl::StatusOr<RequestDescriptor> d = RequestDescriptor::Decode(encoded);
  const std::string operation = d.ok() ? d->operation : std::string("this collective");
  return absl::StrCat(operation, " cannot run while ranks [", absl::StrJoin(joined, ", "),
                      "] have joined (hvd.join): only allreduce takes part with joined ranks");
}

}  // namespace

std::optional<size_t> ResponseCache::Find(const std::string& name,
                                          const std::string& descriptor) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end() || slots_[it->second].descriptor != descriptor) return std::nullopt;
  return it->second;
}

void ResponseCache::Record(const std::string& name, const std::string& descriptor) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    slots_[it->second].descriptor = descriptor;
    return;
  }
  if (slots_.size() >= kCapacity) Clear();
  by_name_.emplace(name, slots_.size());
  slots_.push_back(Entry{name, descriptor});
}

void ResponseCache::Clear() {
  slots_.clear();
  by_name_.clear();
}

absl::StatusOr<std::vector<Announcement>> ParseAnnouncements(const uint8_t* data, size_t bytes,
                                                             int peer) {
  std::vector<Announcement> out;
  size_t at = 0;
  while (at < bytes) {
    Announcement a;
    if (!ReadField(data, bytes, at, a.first) || !ReadField(data, bytes, at, a.second)) {
      return absl::DataLossError(
          absl::StrCat("negotiation: rank ", peer, " sent announcements that do not parse"));
    }
    out.push_back(std::move(a));
  }
  return out;
}

size_t AnnouncementsOffset(const ResponseCache& cache) {
  return kPartHeaderBytes + BitsetBytes(cache.size());
}

size_t EncodePart(const std::vector<const Request*>& pending, int64_t fusion_threshold,
                  const ResponseCache& cache, size_t room, uint8_t* out,
                  std::string& announcements) {
  const size_t offset = AnnouncementsOffset(cache);
  std::memset(out, 0, offset);
  for (const Request* request : pending) {
    if (std::optional<size_t> slot = cache.Find(request->name, request->descriptor)) {
      out[kPartHeaderBytes + *slot / 8] |= static_cast<uint8_t>(1u << (*slot % 8));
    } else {
      AppendField(announcements, request->name);
      AppendField(announcements, request->descriptor);
    }
  }
  const PartHeader header{fusion_threshold, static_cast<int64_t>(announcements.size())};
  std::memcpy(out, &header, kPartHeaderBytes);
  if (announcements.size() > room) return offset;  // in the second exchange
  std::memcpy(out + offset, announcements.data(), announcements.size());
  return offset + announcements.size();
}

absl::Status DecodePart(absl::Span<const uint8_t> part, int rank, const ResponseCache& cache,
                        size_t room, RoundData& data) {
  const size_t offset = AnnouncementsOffset(cache);
  if (part.size() < offset) {
    return absl::DataLossError(absl::StrCat("negotiation: rank ", rank, " sent ", part.size(),
                                            " bytes, short of the ", offset, " every part has"));
  }
  PartHeader& header = data.headers[rank];
  std::memcpy(&header, part.data(), kPartHeaderBytes);
  data.bitsets[rank] = part.data() + kPartHeaderBytes;
  const int64_t bytes = header.announcement_bytes;
  if (bytes < 0) {
    return absl::DataLossError(
        absl::StrCat("negotiation: rank ", rank, " announced ", bytes, " bytes"));
  }
  if (static_cast<uint64_t>(bytes) > room) {
    data.announced_later.push_back(rank);
    return absl::OkStatus();
  }
  if (part.size() - offset < static_cast<uint64_t>(bytes)) {
    return absl::DataLossError(absl::StrCat("negotiation: rank ", rank, " announced ", bytes,
                                            " bytes but sent ", part.size() - offset));
  }
  absl::StatusOr<std::vector<Announcement>> announced =
      ParseAnnouncements(part.data() + offset, static_cast<size_t>(bytes), rank);
  if (!announced.ok()) return announced.status();
  data.announced[rank] = *std::move(announced);
  return absl::OkStatus();
}

// A name pending somewhere this round: the descriptor each rank has it
// pending with (null: not pending), and whether any rank announced it (else
// every rank named its cache slot, which holds it already).
struct PendingName {
  absl::InlinedVector<const std::string*, 4> by_rank;
  bool announced = false;
};

NegotiationResult Decide(const RoundData& data, ResponseCache& cache,
                         std::vector<Announcement>* cached) {
  const size_t ranks = data.headers.size();
  // Every round decides every pending name, on every rank: keyed by views of
  // the cache's and the announcements' names (both outlive the loop below),
  // so a steady loop copies no name and no descriptor here.
  std::map<std::string_view, PendingName> pending;
  auto entry = [&](const std::string& name) -> PendingName& {
    PendingName& p = pending[name];
    p.by_rank.resize(ranks, nullptr);
    return p;
  };
  for (size_t r = 0; r < ranks; ++r) {
    for (size_t slot = 0; slot < cache.size(); ++slot) {
      if ((data.bitsets[r][slot / 8] >> (slot % 8)) & 1) {
        entry(cache.slot(slot).name).by_rank[r] = &cache.slot(slot).descriptor;
      }
    }
    for (const Announcement& a : data.announced[r]) {
      PendingName& p = entry(a.first);
      p.by_rank[r] = &a.second;
      p.announced = true;
    }
  }
  NegotiationResult result;
  result.fusion_threshold = data.headers[0].fusion_threshold;
  // A rank with its join pending stands in for every request it lacks.
  std::vector<bool> joined(ranks, false);
  if (auto join = pending.find(kJoinRequestName); join != pending.end()) {
    for (size_t r = 0; r < ranks; ++r) {
      if (join->second.by_rank[r] != nullptr) {
        joined[r] = true;
        result.joined.push_back(static_cast<int>(r));
      }
    }
  }
  std::vector<Announcement> to_cache;
  for (const auto& [name, entry] : pending) {
    const auto& by_rank = entry.by_rank;
    const bool is_join = name == kJoinRequestName;
    bool everywhere = true, agree = true;
    const std::string* first = nullptr;
    int contributors = 0;
    std::vector<int> missing;
    for (size_t r = 0; r < ranks; ++r) {
      const std::string* d = by_rank[r];
      if (d == nullptr) {
        if (is_join || !joined[r]) {
          everywhere = false;
          missing.push_back(static_cast<int>(r));
        }
        continue;
      }
      ++contributors;
      if (first == nullptr) first = d;
      agree = agree && *d == *first;
    }
    if (!everywhere) {
      // A join waits for the others by design: no stall.
      if (!is_join) result.waiting.emplace(std::string(name), std::move(missing));
      continue;
    }
    if (!agree) {
      result.conflicts.push_back(Conflict{std::string(name), ConflictMessage(by_rank)});
      continue;
    }
    if (contributors < static_cast<int>(ranks) && !JoinedRanksMayStandIn(*first)) {
      result.conflicts.push_back(
          Conflict{std::string(name), NotWithJoinedMessage(*first, result.joined)});
      continue;
    }
    result.ready.emplace_back(name);
    if (!result.joined.empty()) {
      result.ready_descriptors.push_back(*first);
    }
    if (entry.announced) to_cache.emplace_back(std::string(name), *first);
  }
  // After the loop: Record may move the strings `pending` points into.
  for (const Announcement& a : to_cache) cache.Record(a.first, a.second);
  if (cached != nullptr) *cached = std::move(to_cache);
  return result;
}

}  // namespace horovodd::internal
