#include "worker_runtime/engine/engine_request.h"

#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd::internal {
namespace {

// A little-endian-agnostic byte writer: descriptors only travel between
// ranks of one job, which run the same build.
class Writer {
 public:
  // Every request's descriptor is written on the caller's thread as it is
  // enqueued: one allocation, not one per growth.
  explicit Writer(size_t expected) { bytes_.reserve(expected); }
  template <typename T>
  void Put(const T& value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void PutString(const std::string& text) {
    Put(static_cast<uint32_t>(text.size()));
    bytes_.append(text);
  }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* text) {
    uint32_t size = 0;
    if (!Get(&size) || bytes_.size() - at_ < size) return false;
    text->assign(bytes_, at_, size);
    at_ += size;
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

// Upper bounds that keep a corrupt descriptor from allocating wildly.
constexpr uint32_t kMaxTensors = 1 << 20;
constexpr uint32_t kMaxDims = 64;

}  // namespace

std::string RequestDescriptor::Encode() const {
  size_t expected = 64 + operation.size();
  for (const std::vector<int64_t>& shape : shapes) expected += 4 + 8 * shape.size();
  Writer out(expected);
  out.Put(static_cast<uint8_t>(kind));
  out.PutString(operation);
  out.Put(static_cast<uint8_t>(device));
  out.Put(static_cast<uint8_t>(dtype));
  out.Put(static_cast<uint8_t>(op));
  out.Put(root);
  out.Put(prescale_factor);
  out.Put(postscale_factor);
  out.Put(static_cast<uint32_t>(shapes.size()));
  for (const std::vector<int64_t>& shape : shapes) {
    out.Put(static_cast<uint32_t>(shape.size()));
    for (int64_t dim : shape) out.Put(dim);
  }
  return out.Take();
}

absl::StatusOr<RequestDescriptor> RequestDescriptor::Decode(const std::string& bytes) {
  RequestDescriptor d;
  Reader in(bytes);
  uint8_t kind = 0, device = 0, dtype = 0, op = 0;
  uint32_t tensors = 0;
  bool ok = in.Get(&kind) && in.GetString(&d.operation) && in.Get(&device) && in.Get(&dtype) &&
            in.Get(&op) && in.Get(&d.root) && in.Get(&d.prescale_factor) &&
            in.Get(&d.postscale_factor) && in.Get(&tensors) && tensors <= kMaxTensors;
  for (uint32_t t = 0; ok && t < tensors; ++t) {
    uint32_t dims = 0;
    ok = in.Get(&dims) && dims <= kMaxDims;
    std::vector<int64_t> shape(ok ? dims : 0);
    for (uint32_t i = 0; ok && i < dims; ++i) ok = in.Get(&shape[i]);
    d.shapes.push_back(std::move(shape));
  }
  if (!ok || !in.done()) {
    return absl::DataLossError("a peer sent a request descriptor that does not parse");
  }
  d.kind = static_cast<RequestKind>(kind);
  d.device = static_cast<DeviceType>(device);
  d.dtype = static_cast<DType>(dtype);
  d.op = static_cast<ReduceOp>(op);
  return d;
}

std::string RequestDescriptor::ToString() const {
  std::vector<std::string> shape_texts;
  for (const std::vector<int64_t>& shape : shapes) shape_texts.push_back(ShapeString(shape));
  std::string text =
      absl::StrCat(operation, " of ", DTypeName(dtype), " ", absl::StrJoin(shape_texts, ", "));
  if (kind == RequestKind::kAllgather) absl::StrAppend(&text, " (rows after the first)");
  if (device == DeviceType::kCUDA) absl::StrAppend(&text, " on GPU");
  if (kind == RequestKind::kAllreduce || kind == RequestKind::kReducescatter) {
    absl::StrAppend(&text, " (", ReduceOpName(op));
    if (prescale_factor != 1.0) absl::StrAppend(&text, ", prescale ", prescale_factor);
    if (postscale_factor != 1.0) absl::StrAppend(&text, ", postscale ", postscale_factor);
    absl::StrAppend(&text, ")");
  }
  if (kind == RequestKind::kBroadcast) absl::StrAppend(&text, " from root ", root);
  return text;
}

std::string UserFacingName(const std::string& name) {
  constexpr std::string_view kSync = "horovodd.sync.";
  if (name.compare(0, kSync.size(), kSync) != 0) return name;
  const std::string rest = name.substr(kSync.size());
  const size_t dot = rest.find('.');
  return dot == std::string::npos ? rest : rest.substr(dot + 1);
}

size_t Request::nbytes() const {
  size_t total = 0;
  for (const TensorView& tensor : tensors) total += tensor.nbytes();
  return total;
}

RequestDescriptor Describe(const Request& request) {
  RequestDescriptor d;
  d.kind = request.kind;
  switch (request.kind) {
    case RequestKind::kAllreduce:
      d.operation = "allreduce";
      break;
    case RequestKind::kBroadcast:
      d.operation = "broadcast";
      break;
    case RequestKind::kAllgather:
      d.operation = "allgather";
      break;
    case RequestKind::kOpaque:
      d.operation = request.opaque_operation;
      break;
    case RequestKind::kJoin:
      d.operation = "join";
      break;
    case RequestKind::kReducescatter:
      d.operation = "reducescatter";
      break;
  }
  if (!request.tensors.empty()) {
    d.device = request.tensors.front().device.type;
    d.dtype = request.tensors.front().dtype;
  }
  if (request.kind == RequestKind::kAllreduce || request.kind == RequestKind::kReducescatter) {
    d.op = request.options.op;
    d.prescale_factor = request.options.prescale_factor;
    d.postscale_factor = request.options.postscale_factor;
  }
  if (request.kind == RequestKind::kBroadcast) d.root = request.root;
  for (const TensorView& tensor : request.tensors) {
    std::vector<int64_t> shape = tensor.shape;
    if (request.kind == RequestKind::kAllgather && !shape.empty()) shape.erase(shape.begin());
    d.shapes.push_back(std::move(shape));
  }
  return d;
}

}  // namespace horovodd::internal
