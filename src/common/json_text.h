// JSON string quoting, shared by the daemon's JSON log lines (logging.cc)
// and the proto messages' JSON (src/message_json/message_json.cc).
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/str_format.h"

namespace horovodd {

// `text` as a JSON string literal: quotes, backslashes and control
// characters escaped; other bytes (UTF-8 included) as they are.
inline std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace horovodd
