// JSON for horovodctl --output json, written from the proto messages by
// reflection. Unlike protobuf's own JSON printer this keeps 64-bit integers
// as numbers (proto3's mapping quotes them), so `jq .generation` and
// json.loads give numbers. Keys are the proto field names (snake_case); every
// field is printed, defaults included, so scripts never miss a key.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

#include "common/json_text.h"

namespace horovodd::cli {

struct JsonStyle {
  // Spaces per nesting level; 0 writes everything on one line (JSON Lines).
  int indent = 2;
};

// `message` as a JSON object.
std::string MessageToJson(const google::protobuf::Message& message, JsonStyle style = {});

// Building blocks for documents that are not one message (and JsonQuote,
// from common/json_text.h).
std::string JsonNumber(double value);

}  // namespace horovodd::cli
