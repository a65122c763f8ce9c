#include "daemon/http/http_message.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace horovodd::daemon {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> HttpRequest::Header(absl::string_view name) const {
  auto it = headers.find(std::string(name));
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::string HttpRequest::Query(absl::string_view name) const {
  auto it = query.find(std::string(name));
  return it == query.end() ? std::string() : it->second;
}

const char* HttpReason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 303:
      return "See Other";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return code < 400 ? "OK" : "Error";
  }
}

HttpResponse TextResponse(int code, std::string text) {
  HttpResponse response;
  response.code = code;
  response.body = std::move(text);
  return response;
}

std::string PercentDecode(absl::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int high = HexValue(text[i + 1]), low = HexValue(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    out += (c == '+' && plus_is_space) ? ' ' : c;
  }
  return out;
}

std::string PercentEncode(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

std::map<std::string, std::string> ParseFormData(absl::string_view text) {
  std::map<std::string, std::string> values;
  for (absl::string_view pair : absl::StrSplit(text, '&', absl::SkipEmpty())) {
    const auto equals = pair.find('=');
    const absl::string_view name = pair.substr(0, equals);
    const absl::string_view value =
        equals == absl::string_view::npos ? absl::string_view() : pair.substr(equals + 1);
    values[PercentDecode(name, true)] = PercentDecode(value, true);
  }
  return values;
}

absl::StatusOr<HttpRequest> ParseRequestHead(absl::string_view head) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  const absl::string_view line = lines.front();
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() ||
      !absl::StartsWith(parts[2], "HTTP/")) {
    return absl::InvalidArgumentError("malformed request line");
  }
  HttpRequest request;
  request.method = std::string(parts[0]);
  request.target = std::string(parts[1]);
  const auto question = parts[1].find('?');
  request.path = PercentDecode(parts[1].substr(0, question), false);
  if (question != absl::string_view::npos) {
    request.query = ParseFormData(parts[1].substr(question + 1));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const auto colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("malformed header line ", i));
    }
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    auto [it, inserted] = request.headers.emplace(name, value);
    if (!inserted) absl::StrAppend(&it->second, ", ", value);
  }
  return request;
}

std::string FormatResponseHead(const HttpResponse& response, std::optional<size_t> content_length) {
  std::string head = absl::StrCat("HTTP/1.1 ", response.code, " ", HttpReason(response.code),
                                  "\r\nContent-Type: ", response.content_type, "\r\n");
  if (content_length) absl::StrAppend(&head, "Content-Length: ", *content_length, "\r\n");
  absl::StrAppend(&head, "Connection: close\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&head, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&head, "\r\n");
  return head;
}

}  // namespace horovodd::daemon
