#include "horovodd/device_tensor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/tensor/collective_args.h"

namespace horovodd {
namespace {

absl::Status CheckHostView(const char* what, const DeviceTensor& tensor, const TensorView& host) {
  if (host.device.type != DeviceType::kCPU) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the host side is on CUDA device ", host.device.index));
  }
  if (host.dtype != tensor.dtype() || host.numel() != tensor.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": host tensor is ", DTypeName(host.dtype), " ",
                     internal::ShapeString(host.shape), " but the device tensor is ",
                     DTypeName(tensor.dtype()), " ", internal::ShapeString(tensor.shape())));
  }
  if (host.data == nullptr && host.nbytes() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": host tensor data is null"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceTensor> DeviceTensor::Create(int device, DType dtype,
                                                  std::vector<int64_t> shape) {
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("DeviceTensor: shape ",
                                                     internal::ShapeString(shape),
                                                     " has a negative dimension at index ", i));
    }
    count *= shape[i];
  }
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  HVDD_ASSIGN_OR_RETURN(void* const data, internal::CudaAllocate(device, bytes));
  DeviceTensor tensor;
  tensor.device_ = device;
  tensor.dtype_ = dtype;
  tensor.shape_ = std::move(shape);
  tensor.data_ = data;
  tensor.bytes_ = bytes;
  return tensor;
}

absl::StatusOr<DeviceTensor> DeviceTensor::FromHost(const TensorView& host, int device) {
  absl::StatusOr<DeviceTensor> tensor = Create(device, host.dtype, host.shape);
  if (!tensor.ok()) return tensor.status();
  if (absl::Status copied = tensor->CopyFromHost(host); !copied.ok()) return copied;
  return tensor;
}

DeviceTensor::~DeviceTensor() { Release(); }

DeviceTensor::DeviceTensor(DeviceTensor&& other) noexcept
    : device_(other.device_),
      dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceTensor& DeviceTensor::operator=(DeviceTensor&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceTensor::Release() {
  internal::CudaFree(device_, data_);
  data_ = nullptr;
  bytes_ = 0;
}

int64_t DeviceTensor::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape_) count *= dim;
  return count;
}

TensorView DeviceTensor::view() {
  return TensorView{data_, dtype_, shape_, Device{DeviceType::kCUDA, device_}};
}

absl::Status DeviceTensor::CopyToHost(const TensorView& host) const {
  if (absl::Status valid = CheckHostView("DeviceTensor::CopyToHost", *this, host); !valid.ok()) {
    return valid;
  }
  return internal::CopyDeviceToHost(device_, data_, host.data, bytes_);
}

absl::Status DeviceTensor::CopyFromHost(const TensorView& host) {
  if (absl::Status valid = CheckHostView("DeviceTensor::CopyFromHost", *this, host); !valid.ok()) {
    return valid;
  }
  return internal::CopyHostToDevice(device_, host.data, data_, bytes_);
}

absl::StatusOr<Tensor> DeviceTensor::ToHost() const {
  Tensor host(dtype_, shape_);
  if (absl::Status copied = CopyToHost(host.view()); !copied.ok()) return copied;
  return host;
}

}  // namespace horovodd
