#include "discovery/slurm_parser.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "discovery/host_set.h"

namespace horovodd::discovery {
namespace {

// The most nodes one SLURM_TASKS_PER_NODE may describe; far beyond any cluster,
// and it keeps "1(x999999999)" from allocating gigabytes.
constexpr int64_t kMaxNodes = 1 << 20;

bool IsKeyChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '/' || c == ':'; }

// "Key=..." with a Slurm-looking key.
bool StartsRecordField(absl::string_view word) {
  const size_t eq = word.find('=');
  if (eq == 0 || eq == absl::string_view::npos) return false;
  if (!absl::ascii_isalpha(word[0])) return false;
  for (char c : word.substr(0, eq)) {
    if (!IsKeyChar(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseTasksPerNode(absl::string_view text) {
  std::vector<int> counts;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty()) return absl::InvalidArgumentError("SLURM_TASKS_PER_NODE is empty");
  for (absl::string_view entry : absl::StrSplit(trimmed, ',')) {
    auto bad = [&] {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_TASKS_PER_NODE '", text, "': entry '",
                                                     entry, "' is not N or N(xM) with N in [1, ",
                                                     kMaxSlotsPerHost, "] and M >= 1"));
    };
    absl::string_view count_text = entry;
    int64_t repeat = 1;
    if (const size_t open = entry.find('('); open != absl::string_view::npos) {
      absl::string_view times = entry.substr(open);
      count_text = entry.substr(0, open);
      if (!absl::ConsumePrefix(&times, "(x") || !absl::ConsumeSuffix(&times, ")") ||
          !absl::SimpleAtoi(times, &repeat) || repeat < 1 || repeat > kMaxNodes) {
        return bad();
      }
    }
    int count = 0;
    if (!absl::SimpleAtoi(count_text, &count) || count < 1 || count > kMaxSlotsPerHost) {
      return bad();
    }
    if (static_cast<int64_t>(counts.size()) + repeat > kMaxNodes) return bad();
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
  }
  return counts;
}

std::map<std::string, std::string> ParseScontrolRecord(absl::string_view line) {
  std::map<std::string, std::string> fields;
  std::string* last = nullptr;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    if (StartsRecordField(word)) {
      const size_t eq = word.find('=');
      last = &fields[std::string(word.substr(0, eq))];
      *last = std::string(word.substr(eq + 1));
    } else if (last != nullptr) {
      absl::StrAppend(last, " ", word);
    }
  }
  return fields;
}

absl::StatusOr<std::vector<SlurmNode>> ParseScontrolNodes(absl::string_view text) {
  std::vector<SlurmNode> nodes;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::map<std::string, std::string> fields = ParseScontrolRecord(line);
    auto name = fields.find("NodeName");
    if (name == fields.end() || name->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scontrol printed a node record without NodeName: '", line.substr(0, 200), "'"));
    }
    SlurmNode node;
    node.name = name->second;
    node.address = fields["NodeAddr"];
    node.state = fields["State"];
    nodes.push_back(std::move(node));
  }
  return nodes;
}

bool SlurmNodeUsable(absl::string_view state) {
  if (state.empty() || absl::EndsWith(state, "*")) return false;
  for (absl::string_view flag : absl::StrSplit(state, '+')) {
    for (absl::string_view bad :
         {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING",
          "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "FUTURE", "REBOOT_ISSUED", "UNKNOWN"}) {
      if (flag == bad) return false;
    }
  }
  return true;
}

absl::StatusOr<SlurmJob> ParseScontrolJob(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (lines.empty()) return absl::InvalidArgumentError("scontrol printed no job record");
  std::map<std::string, std::string> fields = ParseScontrolRecord(lines.front());
  auto state = fields.find("JobState");
  if (state == fields.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scontrol printed a job record without JobState: '", lines.front().substr(0, 200), "'"));
  }
  return SlurmJob{state->second, fields["NodeList"]};
}

bool IsValidSlurmJobId(absl::string_view id) {
  std::vector<absl::string_view> parts = absl::StrSplit(id, '_');
  if (parts.size() > 2 || id.size() > 32) return false;
  for (absl::string_view part : parts) {
    if (part.empty()) return false;
    for (char c : part) {
      if (!absl::ascii_isdigit(c)) return false;
    }
  }
  return true;
}

}  // namespace horovodd::discovery
