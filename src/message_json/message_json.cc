#include "message_json/message_json.h"

#include <charconv>
#include <cmath>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace horovodd {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

class Writer {
 public:
  explicit Writer(JsonStyle style) : style_(style) {}

  void WriteMessage(const Message& message) {
    const auto* descriptor = message.GetDescriptor();
    const Reflection* reflection = message.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const FieldDescriptor* field = descriptor->field(i);
      // Of a oneof only the member that is set exists.
      if (field->real_containing_oneof() != nullptr && !reflection->HasField(message, field)) {
        continue;
      }
      fields.push_back(field);
    }
    Open('{');
    for (size_t i = 0; i < fields.size(); ++i) {
      Item(i);
      out_ += JsonQuote(fields[i]->name());
      out_ += style_.indent > 0 ? ": " : ":";
      WriteField(message, *fields[i]);
    }
    Close('}', !fields.empty());
  }

  std::string Take() { return std::move(out_); }

 private:
  void WriteField(const Message& message, const FieldDescriptor& field) {
    const Reflection* reflection = message.GetReflection();
    if (field.is_map()) {
      WriteMap(message, field);
      return;
    }
    if (field.is_repeated()) {
      const int count = reflection->FieldSize(message, &field);
      Open('[');
      for (int i = 0; i < count; ++i) {
        Item(i);
        WriteValue(message, field, i);
      }
      Close(']', count > 0);
      return;
    }
    WriteValue(message, field, -1);
  }

  // JSON object keys are strings, so map keys of any type are written quoted.
  void WriteMap(const Message& message, const FieldDescriptor& field) {
    const Reflection* reflection = message.GetReflection();
    const int count = reflection->FieldSize(message, &field);
    const FieldDescriptor* key = field.message_type()->map_key();
    const FieldDescriptor* value = field.message_type()->map_value();
    Open('{');
    for (int i = 0; i < count; ++i) {
      const Message& entry = reflection->GetRepeatedMessage(message, &field, i);
      Item(i);
      Writer key_writer(JsonStyle{0});
      key_writer.WriteValue(entry, *key, -1);
      std::string key_text = key_writer.Take();
      out_ += key->type() == FieldDescriptor::TYPE_STRING ? key_text : JsonQuote(key_text);
      out_ += style_.indent > 0 ? ": " : ":";
      WriteValue(entry, *value, -1);
    }
    Close('}', count > 0);
  }

  // One value of `field`: element `index` of a repeated field, or the singular value (-1).
  void WriteValue(const Message& message, const FieldDescriptor& field, int index) {
    const Reflection* r = message.GetReflection();
    const bool rep = index >= 0;
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        out_ += absl::StrCat(rep ? r->GetRepeatedInt32(message, &field, index)
                                 : r->GetInt32(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        out_ += absl::StrCat(rep ? r->GetRepeatedInt64(message, &field, index)
                                 : r->GetInt64(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        out_ += absl::StrCat(rep ? r->GetRepeatedUInt32(message, &field, index)
                                 : r->GetUInt32(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        out_ += absl::StrCat(rep ? r->GetRepeatedUInt64(message, &field, index)
                                 : r->GetUInt64(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        out_ += JsonNumber(rep ? r->GetRepeatedDouble(message, &field, index)
                               : r->GetDouble(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        out_ += JsonNumber(rep ? r->GetRepeatedFloat(message, &field, index)
                               : r->GetFloat(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        out_ += (rep ? r->GetRepeatedBool(message, &field, index) : r->GetBool(message, &field))
                    ? "true"
                    : "false";
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int number = rep ? r->GetRepeatedEnumValue(message, &field, index)
                               : r->GetEnumValue(message, &field);
        const auto* value = field.enum_type()->FindValueByNumber(number);
        out_ += value != nullptr ? JsonQuote(value->name()) : absl::StrCat(number);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& text =
            rep ? r->GetRepeatedStringReference(message, &field, index, &scratch)
                : r->GetStringReference(message, &field, &scratch);
        out_ += JsonQuote(field.type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(text)
                                                                      : text);
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        WriteMessage(rep ? r->GetRepeatedMessage(message, &field, index)
                         : r->GetMessage(message, &field));
        break;
    }
  }

  void Open(char bracket) {
    out_ += bracket;
    ++depth_;
  }
  // Before the i-th element of an object or array.
  void Item(size_t i) {
    if (i > 0) out_ += ',';
    NewLine();
  }
  void Close(char bracket, bool had_items) {
    --depth_;
    if (had_items) NewLine();
    out_ += bracket;
  }
  void NewLine() {
    if (style_.indent <= 0) return;
    out_ += '\n';
    out_.append(static_cast<size_t>(depth_ * style_.indent), ' ');
  }

  const JsonStyle style_;
  int depth_ = 0;
  std::string out_;
};

}  // namespace

std::string MessageToJson(const Message& message, JsonStyle style) {
  Writer writer(style);
  writer.WriteMessage(message);
  return writer.Take();
}

std::string JsonNumber(double value) {
  // JSON has no NaN or infinity; protobuf's JSON mapping spells them as strings.
  if (std::isnan(value)) return "\"NaN\"";
  if (std::isinf(value)) return value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  // The shortest text that reads back as the same double (no 0.1000000000000001).
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace horovodd
