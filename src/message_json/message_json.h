// JSON written from proto messages by reflection, so that horovodctl
// --output json and the daemon's status page (daemon/status_page/) print the
// same fields. Unlike protobuf's own JSON printer this keeps 64-bit integers
// as numbers (proto3's mapping quotes them), so `jq .generation`, json.loads
// and JavaScript give numbers. Keys are the proto field names (snake_case);
// every field is printed, defaults included, so readers never miss a key.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

#include "common/json_text.h"

namespace horovodd {

struct JsonStyle {
  // Spaces per nesting level; 0 writes everything on one line (JSON Lines).
  int indent = 2;
};

// `message` as a JSON object.
std::string MessageToJson(const google::protobuf::Message& message, JsonStyle style = {});

// Building blocks for documents that are not one message (and JsonQuote,
// from common/json_text.h).
std::string JsonNumber(double value);

}  // namespace horovodd
