#include "worker_runtime/nccl/nccl_comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/gpu/cuda_memory.h"
#include "worker_runtime/gpu/cuda_status.h"
#include "worker_runtime/nccl/nccl_status.h"

namespace horovodd::internal {
namespace {

absl::StatusOr<std::string> MakeUniqueId() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) {
    return NcclStatus(result, "ncclGetUniqueId", ncclGetLastError(nullptr));
  }
  return std::string(id.internal, sizeof(id.internal));
}

ncclConfig_t NonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Short waits are spent yielding (an op on one GPU takes microseconds);
// long ones sleep, so a wait on a slow peer does not burn a core.
void Backoff(int polls) {
  if (polls < 256) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

absl::Status CheckOptions(const NcclCommOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat(options.name, ": rank ", options.rank,
                                                   " is out of range for size ", options.size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(options.name, ": timeout must be positive, got ",
                                                   absl::FormatDuration(options.timeout)));
  }
  return CheckCudaDevice(options.device);
}

}  // namespace

NcclComm::NcclComm(NcclCommOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(NcclCommOptions options,
                                                           KvStore& store) {
  if (absl::Status valid = CheckOptions(options); !valid.ok()) return valid;
  ScopedCudaDevice on(options.device);
  if (!on.status().ok()) return on.status();

  UniqueIdExchange exchange;
  exchange.rank = options.rank;
  exchange.id_bytes = NCCL_UNIQUE_ID_BYTES;
  exchange.timeout = options.timeout;
  exchange.make_id = MakeUniqueId;
  HVDD_ASSIGN_OR_RETURN(const std::string id_bytes, ExchangeUniqueId(store, exchange));
  ncclUniqueId id;
  std::memcpy(id.internal, id_bytes.data(), sizeof(id.internal));

  std::unique_ptr<NcclComm> comm(new NcclComm(std::move(options)));
  if (absl::Status created = comm->CreateStreamAndEvents(); !created.ok()) return created;
  ncclConfig_t config = NonBlockingConfig();
  const ncclResult_t started =
      ncclCommInitRankConfig(&comm->comm_, comm->size(), id, comm->rank(), &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    return comm->Fail(NcclStatus(started, absl::StrCat(comm->name(), ": ncclCommInitRankConfig"),
                                 ncclGetLastError(comm->comm_)));
  }
  if (absl::Status ready = comm->WaitReady(absl::StrCat("creating ", comm->name())); !ready.ok()) {
    return ready;
  }
  return comm;
}

NcclComm::~NcclComm() {
  ScopedCudaDevice on(options_.device);
  AbortHandle();
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (caller_ready_ != nullptr) cudaEventDestroy(caller_ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

absl::Status NcclComm::CreateStreamAndEvents() {
  // Non-blocking: the legacy default stream never waits for our stream, so a
  // collective stuck on a lost peer cannot stall the caller's other GPU work.
  absl::Status status = CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                   "cudaStreamCreateWithFlags");
  if (status.ok()) {
    status = CudaStatus(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming),
                        "cudaEventCreateWithFlags");
  }
  if (status.ok()) {
    status = CudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                        "cudaEventCreateWithFlags");
  }
  return status;
}

bool NcclComm::ShouldAbort() const { return options_.should_abort && options_.should_abort(); }

void NcclComm::AbortHandle() {
  if (comm_ == nullptr) return;
  // Blocking even for non-blocking communicators; it stops our kernels
  // rather than waiting for peers.
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

absl::Status NcclComm::Fail(absl::Status failure) {
  if (failure_.ok()) failure_ = failure;
  ScopedCudaDevice on(options_.device);
  AbortHandle();
  return failure;
}

absl::StatusOr<ncclResult_t> NcclComm::AsyncState(const std::string& label) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
  if (asked != ncclSuccess) {
    return NcclStatus(asked, absl::StrCat(label, ": ncclCommGetAsyncError"),
                      ncclGetLastError(comm_));
  }
  if (state == ncclSuccess || state == ncclInProgress) return state;
  return NcclStatus(state, label, ncclGetLastError(comm_));
}

absl::Status NcclComm::Poll(const std::string& label,
                            const std::function<absl::StatusOr<bool>()>& check) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  for (int polls = 0;; ++polls) {
    absl::StatusOr<bool> done = check();
    if (!done.ok()) return Fail(done.status());
    if (*done) return absl::OkStatus();
    if (ShouldAbort()) {
      return Fail(absl::AbortedError(
          absl::StrCat(label, ": aborted (", options_.name, " was superseded)")));
    }
    if (absl::Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(label, ": not finished after ", absl::FormatDuration(options_.timeout))));
    }
    Backoff(polls);
  }
}

absl::Status NcclComm::WaitReady(const std::string& label) {
  return Poll(label, [this, &label]() -> absl::StatusOr<bool> {
    HVDD_ASSIGN_OR_RETURN(const ncclResult_t state, AsyncState(label));
    return state == ncclSuccess;
  });
}

absl::Status NcclComm::Enqueued(ncclResult_t result, const std::string& call) {
  if (result == ncclSuccess) return absl::OkStatus();
  if (result != ncclInProgress) return NcclStatus(result, call, ncclGetLastError(comm_));
  return WaitReady(call);
}

absl::Status NcclComm::CudaEnqueued(cudaError_t error, const std::string& call) {
  return CudaStatus(error, call);
}

absl::Status NcclComm::Group(const std::string& call, const std::function<absl::Status()>& calls) {
  const ncclResult_t started = ncclGroupStart();
  if (started != ncclSuccess) return NcclStatus(started, absl::StrCat(call, ": ncclGroupStart"));
  const absl::Status queued = calls();
  // Ended even when a call failed: NCCL's group state is per thread.
  const ncclResult_t ended = ncclGroupEnd();
  if (!queued.ok()) return queued;
  return Enqueued(ended, absl::StrCat(call, ": ncclGroupEnd"));
}

absl::StatusOr<void*> NcclComm::PinnedScratch(size_t bytes) {
  if (bytes <= pinned_bytes_) return pinned_;
  // Grows only between ops, when our stream is idle.
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  const size_t rounded = std::max<size_t>(bytes, 4096);
  ScopedCudaDevice on(options_.device);
  if (!on.status().ok()) return on.status();
  HVDD_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&pinned_, rounded),
                                  absl::StrCat("cudaMallocHost of ", rounded, " bytes")));
  pinned_bytes_ = rounded;
  return pinned_;
}

absl::Status NcclComm::Run(const std::string& label, const Enqueue& enqueue) {
  if (!failure_.ok()) return failure_;
  if (ShouldAbort()) {
    return Fail(absl::AbortedError(
        absl::StrCat(label, ": not started (", options_.name, " was superseded)")));
  }
  ScopedCudaDevice on(options_.device);
  if (!on.status().ok()) return on.status();
  absl::Status status =
      CudaStatus(cudaEventRecord(caller_ready_, cudaStreamLegacy), "cudaEventRecord");
  if (status.ok()) {
    status = CudaStatus(cudaStreamWaitEvent(stream_, caller_ready_, 0), "cudaStreamWaitEvent");
  }
  if (status.ok()) status = enqueue(*this);
  if (status.ok()) status = CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord");
  if (!status.ok()) return Fail(status);
  return Poll(label, [this, &label]() -> absl::StatusOr<bool> {
    HVDD_RETURN_IF_ERROR(AsyncState(label).status());
    const cudaError_t query = cudaEventQuery(done_);
    if (query == cudaErrorNotReady) return false;
    if (query != cudaSuccess) return CudaStatus(query, absl::StrCat(label, ": cudaEventQuery"));
    return true;
  });
}

absl::StatusOr<StreamBuffer> StreamBuffer::Allocate(NcclComm& comm, size_t bytes) {
  void* data = nullptr;
  if (bytes > 0) {
    HVDD_RETURN_IF_ERROR(
        CudaStatus(cudaMallocAsync(&data, bytes, comm.stream()),
                   absl::StrCat("cudaMallocAsync of ", bytes, " bytes on device ", comm.device())));
  }
  return StreamBuffer(comm.stream(), data);
}

StreamBuffer::StreamBuffer(StreamBuffer&& other) noexcept
    : stream_(other.stream_), data_(std::exchange(other.data_, nullptr)) {}

StreamBuffer::~StreamBuffer() {
  if (data_ != nullptr) cudaFreeAsync(data_, stream_);
}

#if HVDD_NCCL_HAS_SHRINK
absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Shrink(const std::vector<int>& excluded,
                                                           std::function<bool()> should_abort,
                                                           std::string name) {
  const std::string label = absl::StrCat("shrinking ", options_.name, " into ", name);
  if (!failure_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        label, ": it was aborted (", failure_.message(), "); create a new one instead"));
  }
  std::vector<int> ranks = excluded;
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size() || ranks[i] == rank() ||
        (i > 0 && ranks[i] == ranks[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": cannot exclude rank ", ranks[i],
                                                     " (size ", size(), ", our rank ", rank(),
                                                     "; each rank at most once, never our own)"));
    }
  }
  NcclCommOptions child_options = options_;
  child_options.rank =
      rank() -
      static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank()) - ranks.begin());
  child_options.size = size() - static_cast<int>(ranks.size());
  child_options.should_abort = std::move(should_abort);
  child_options.name = std::move(name);

  ScopedCudaDevice on(options_.device);
  if (!on.status().ok()) return on.status();
  std::unique_ptr<NcclComm> child(new NcclComm(std::move(child_options)));
  if (absl::Status created = child->CreateStreamAndEvents(); !created.ok()) return created;
  ncclConfig_t config = NonBlockingConfig();
  const ncclResult_t started =
      ranks.empty() ? ncclCommSplit(comm_, /*color=*/0, /*key=*/rank(), &child->comm_, &config)
                    : ncclCommShrink(comm_, ranks.data(), static_cast<int>(ranks.size()),
                                     &child->comm_, &config, NCCL_SHRINK_DEFAULT);
  if (started != ncclSuccess && started != ncclInProgress) {
    return child->Fail(NcclStatus(started, label, ncclGetLastError(comm_)));
  }
  // NCCL makes the child in a job linked to this communicator and hands out
  // its handle only when the job is done: wait on our own state first. A
  // failure here aborts this communicator too (it is then no use either).
  HVDD_RETURN_IF_ERROR(Poll(label, [this, &label]() -> absl::StatusOr<bool> {
    HVDD_ASSIGN_OR_RETURN(const ncclResult_t state, AsyncState(label));
    return state == ncclSuccess;
  }));
  if (child->comm_ == nullptr) {
    return absl::InternalError(absl::StrCat(label, ": NCCL finished without a communicator"));
  }
  if (absl::Status ready = child->WaitReady(label); !ready.ok()) return ready;
  return child;
}
#endif

}  // namespace horovodd::internal
