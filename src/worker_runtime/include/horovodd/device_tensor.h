// An owning, contiguous tensor in GPU memory, for programs that have no
// framework to own their GPU memory (the elastic example, the GPU check) and
// for the GPU collectives' results. Frameworks pass their own memory to the
// collectives as a TensorView with device {kCUDA, index} instead.
//
// Every call works on the tensor's own device and leaves the calling thread's
// current CUDA device as it was. Copies are blocking and ordered after the
// work the caller already queued on the default stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"

namespace horovodd {

class DeviceTensor {
 public:
  // Uninitialized memory for `shape` on GPU `device`. INVALID_ARGUMENT for a
  // negative dimension or a device that does not exist; FAILED_PRECONDITION
  // ("no GPU: ...") without a GPU or in a build without CUDA;
  // RESOURCE_EXHAUSTED when the GPU is out of memory.
  static absl::StatusOr<DeviceTensor> Create(int device, DType dtype, std::vector<int64_t> shape);
  // A copy of a CPU tensor on GPU `device`.
  static absl::StatusOr<DeviceTensor> FromHost(const TensorView& host, int device);

  DeviceTensor() = default;
  ~DeviceTensor();
  DeviceTensor(DeviceTensor&& other) noexcept;
  DeviceTensor& operator=(DeviceTensor&& other) noexcept;
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  int device() const { return device_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  size_t nbytes() const { return bytes_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  // Device {kCUDA, device()}.
  TensorView view();

  // Between this tensor and a CPU view of the same dtype and element count
  // (INVALID_ARGUMENT otherwise, naming both).
  absl::Status CopyToHost(const TensorView& host) const;
  absl::Status CopyFromHost(const TensorView& host);
  // A CPU copy.
  absl::StatusOr<Tensor> ToHost() const;

 private:
  void Release();

  int device_ = 0;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace horovodd
