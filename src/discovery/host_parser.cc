#include "discovery/host_parser.h"

#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace horovodd::discovery {
namespace {

// Debian's Abseil is built with its own string_view type, distinct from std::string_view.
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Longest piece of input quoted back in an error message: a script may print one 1 MiB line.
constexpr size_t kMaxQuotedChars = 80;
constexpr size_t kMaxHostNameLength = 253;  // the DNS limit

// `text` in double quotes, C-escaped (scripts may print control bytes), cut to a sane length.
std::string Quote(absl::string_view text) {
  const bool cut = text.size() > kMaxQuotedChars;
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuotedChars)),
                      cut ? "...\"" : "\"");
}

bool IsHostNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// Checks one host name; the message says what is wrong but not where (callers add that).
absl::Status CheckHostName(absl::string_view host) {
  if (host.empty()) return absl::InvalidArgumentError("host name is empty");
  if (host.size() > kMaxHostNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name is longer than ", kMaxHostNameLength, " characters"));
  }
  if (host.front() == '-') {
    return absl::InvalidArgumentError(absl::StrCat("host name ", Quote(host), " starts with '-'"));
  }
  for (char c : host) {
    if (!IsHostNameChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat("host name ", Quote(host), " contains ",
                                                     Quote(absl::string_view(&c, 1)),
                                                     " (allowed: letters, digits, '.', '-', '_')"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSlotRange(int slots, absl::string_view what) {
  if (slots < 1 || slots > kMaxSlotsPerHost) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", slots, " is not in [1, ", kMaxSlotsPerHost, "]"));
  }
  return absl::OkStatus();
}

// Digits only: no sign, no spaces, no "0x" -- "a:-1" and "a: 2" are typos, not slot counts.
absl::StatusOr<int> ParseSlots(absl::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("slots ", Quote(text), " is not an integer in [1, ", kMaxSlotsPerHost, "]"));
  };
  // Nine digits cannot overflow an int; anything longer is out of range anyway.
  if (text.empty() || text.size() > 9) return bad();
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return bad();
  }
  int slots = 0;
  if (!absl::SimpleAtoi(text, &slots) || slots < 1 || slots > kMaxSlotsPerHost) return bad();
  return slots;
}

// `host[:slots]`, already stripped of whitespace and comments.
absl::StatusOr<HostSlots> ParseHostEntry(absl::string_view entry, int default_slots) {
  HostSlots result;
  result.slots = default_slots;
  const size_t colon = entry.find(':');
  absl::string_view host = entry.substr(0, colon);
  if (colon != absl::string_view::npos) {
    absl::StatusOr<int> slots = ParseSlots(entry.substr(colon + 1));
    if (!slots.ok()) return slots.status();
    result.slots = *slots;
  }
  HVDD_RETURN_IF_ERROR(CheckHostName(host));
  result.host = std::string(host);
  return result;
}

// "line 3 \"a:0\": slots ..." -- the location and text of the bad entry, then what is wrong.
absl::Status AtEntry(absl::string_view kind, int number, absl::string_view text,
                     const absl::Status& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(kind, " ", number, " ", Quote(text), ": ", what.message()));
}

// Collects entries in the order they are listed (the order ranks are assigned in, as in
// Horovod), collapsing exact duplicates and rejecting conflicting ones.
class HostSetBuilder {
 public:
  absl::Status Add(HostSlots entry) {
    auto [it, inserted] = index_by_host_.emplace(entry.host, hosts_.size());
    if (!inserted) {
      const int listed = hosts_[it->second].slots;
      if (listed != entry.slots) {
        return absl::InvalidArgumentError(absl::StrCat("host ", entry.host, " is listed with ",
                                                       listed, " slots and again with ",
                                                       entry.slots, " slots"));
      }
      return absl::OkStatus();
    }
    hosts_.push_back(std::move(entry));
    return absl::OkStatus();
  }

  HostSet Build() const { return hosts_; }

 private:
  HostSet hosts_;                                // in listed order
  std::map<std::string, size_t> index_by_host_;  // into hosts_
};

// The line without its '#' comment and surrounding whitespace.
absl::string_view StripLine(absl::string_view line) {
  return absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
}

// A hostfile line: "host", "host:N" or "host slots=N".
absl::StatusOr<HostSlots> ParseHostfileLine(absl::string_view line, int default_slots) {
  const size_t space = line.find_first_of(" \t");
  if (space == absl::string_view::npos) return ParseHostEntry(line, default_slots);

  const absl::string_view host = line.substr(0, space);
  if (host.find(':') != absl::string_view::npos) {
    return absl::InvalidArgumentError("slots given both as \":N\" and after the host name");
  }
  HVDD_RETURN_IF_ERROR(CheckHostName(host));

  // "slots=4" or "slots = 4".
  std::string rest;
  for (char c : line.substr(space)) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) rest.push_back(c);
  }
  absl::string_view value = rest;
  if (!absl::ConsumePrefix(&value, "slots=")) {
    return absl::InvalidArgumentError(absl::StrCat("expected \"slots=N\" after the host name, got ",
                                                   Quote(line.substr(space + 1))));
  }
  HVDD_ASSIGN_OR_RETURN(int slots, ParseSlots(value));
  return HostSlots{std::string(host), slots};
}

// Shared loop of the line-oriented formats.
template <typename ParseLine>
absl::StatusOr<HostSet> ParseLines(absl::string_view text, int default_slots,
                                   ParseLine parse_line) {
  HostSetBuilder builder;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view content = StripLine(line);
    if (content.empty()) continue;
    absl::StatusOr<HostSlots> entry = parse_line(content, default_slots);
    if (!entry.ok()) return AtEntry("line", line_number, content, entry.status());
    if (absl::Status s = builder.Add(*std::move(entry)); !s.ok()) {
      return AtEntry("line", line_number, content, s);
    }
  }
  return builder.Build();
}

}  // namespace

absl::StatusOr<HostSet> ParseHostLines(std::string_view text, int default_slots) {
  HVDD_RETURN_IF_ERROR(CheckSlotRange(default_slots, "default slots"));
  return ParseLines(ToAbsl(text), default_slots, ParseHostEntry);
}

absl::StatusOr<HostSet> ParseHostList(std::string_view list_view, int default_slots) {
  HVDD_RETURN_IF_ERROR(CheckSlotRange(default_slots, "default slots"));
  const absl::string_view list = ToAbsl(list_view);
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("host list is empty");
  }
  HostSetBuilder builder;
  int entry_number = 0;
  for (absl::string_view raw : absl::StrSplit(list, ',')) {
    ++entry_number;
    const absl::string_view text = absl::StripAsciiWhitespace(raw);
    absl::StatusOr<HostSlots> entry = ParseHostEntry(text, default_slots);
    if (!entry.ok()) return AtEntry("entry", entry_number, text, entry.status());
    if (absl::Status s = builder.Add(*std::move(entry)); !s.ok()) {
      return AtEntry("entry", entry_number, text, s);
    }
  }
  return builder.Build();
}

absl::StatusOr<HostSet> ParseHostfile(std::string_view contents, int default_slots) {
  HVDD_RETURN_IF_ERROR(CheckSlotRange(default_slots, "default slots"));
  absl::StatusOr<HostSet> hosts = ParseLines(ToAbsl(contents), default_slots, ParseHostfileLine);
  if (hosts.ok() && hosts->empty()) {
    return absl::InvalidArgumentError("hostfile lists no hosts");
  }
  return hosts;
}

}  // namespace horovodd::discovery
