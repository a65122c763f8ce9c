// The host parsers on arbitrary text. The first byte picks the parser (script
// output, --hosts list, hostfile) and the default slots; the rest is the text.
// Every result must be a well-formed host set: unique names (in the order listed, which
// is the order ranks are assigned in), slots >= 1.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "discovery/host_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const int default_slots = 1 + (selector >> 2) % 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<horovodd::discovery::HostSet> hosts;
  switch (selector % 3) {
    case 0:
      hosts = horovodd::discovery::ParseHostLines(text, default_slots);
      break;
    case 1:
      hosts = horovodd::discovery::ParseHostList(text, default_slots);
      break;
    default:
      hosts = horovodd::discovery::ParseHostfile(text, default_slots);
      break;
  }
  if (!hosts.ok()) {
    // A refusal must say what was wrong.
    if (hosts.status().message().empty()) std::abort();
    return 0;
  }
  std::set<std::string> seen;
  for (const auto& host : *hosts) {
    if (host.host.empty() || host.slots < 1) std::abort();
    if (!seen.insert(host.host).second) std::abort();  // one entry per host
  }
  return 0;
}
