// One generation's NCCL communicator, made so that nothing in it can hang the
// training thread or kill the process:
//   - non-blocking (ncclCommInitRankConfig with config.blocking = 0): every
//     NCCL call returns at once, and we poll ncclCommGetAsyncError;
//   - every op runs on the communicator's own non-blocking CUDA stream and is
//     waited for by polling (an event query plus ncclCommGetAsyncError), with
//     should_abort() and a deadline checked between polls;
//   - any failure (an NCCL error, a lost peer, the deadline, should_abort())
//     aborts the communicator with ncclCommAbort, which never waits for
//     peers; every later op returns that failure at once. A new generation
//     gets a new communicator.
//
// Threads: one thread at a time uses a communicator (the collective thread).
// Other threads ask it to stop through should_abort (for the runtime, the
// attach thread records the daemon's abort notice; the polling thread acts on
// it), since NCCL calls on one communicator must not race.
//
// Ordering with the caller's GPU work: an op first waits (on the GPU) for an
// event recorded on the legacy default stream, so it sees everything the
// caller queued on the default stream or any blocking stream before calling;
// it returns only when its own work is done, so anything the caller queues
// afterwards sees its results. Work on the caller's own non-blocking streams
// must be synchronized by the caller first.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_runtime/gpu/unique_id_exchange.h"

// ncclCommShrink appeared in NCCL 2.27.
#define HVDD_NCCL_HAS_SHRINK (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 3))

namespace horovodd::internal {

struct NcclCommOptions {
  int rank = 0;
  int size = 1;
  // The CUDA device of this rank; every tensor of its ops must live there.
  int device = 0;
  // Bounds each wait: for rank 0's unique id, for the communicator to be
  // ready, and for each op to finish.
  absl::Duration timeout = absl::Seconds(30);
  // Polled by the thread using the communicator; true makes the op (or the
  // creation) in progress abort the communicator and return ABORTED. Unset:
  // never. Must be cheap (an atomic load).
  std::function<bool()> should_abort;
  // Names the communicator in messages ("generation 3").
  std::string name = "the NCCL communicator";
};

class NcclComm {
 public:
  // Swaps the unique id through `store` (rank 0 creates and publishes it),
  // then initializes and polls until the communicator is ready.
  // INVALID_ARGUMENT: bad rank, size or device; FAILED_PRECONDITION: no GPU;
  // ABORTED: should_abort() or the store said the generation is over;
  // DEADLINE_EXCEEDED: a wait ran out; UNAVAILABLE: a peer or the network
  // failed; INTERNAL: CUDA or NCCL failed otherwise.
  static absl::StatusOr<std::unique_ptr<NcclComm>> Create(NcclCommOptions options, KvStore& store);
  // Aborts the communicator (ncclCommAbort, never ncclCommDestroy: that may
  // wait for peers that are gone) and frees the stream and events.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  int device() const { return options_.device; }
  const std::string& name() const { return options_.name; }
  // OK while usable; otherwise the failure that aborted it.
  const absl::Status& health() const { return failure_; }
  // should_abort() is true: its generation is over, its next poll aborts it.
  bool abort_requested() const { return ShouldAbort(); }

  // Enqueues one op's NCCL calls and kernels on stream(), checking each NCCL
  // call with Enqueued() and each CUDA call with CudaEnqueued().
  using Enqueue = std::function<absl::Status(NcclComm&)>;

  // Runs one op (see the ordering above) and waits for it. `label` starts
  // every message ("allreduce 'grads'"). A failure of any kind aborts the
  // communicator; callers check their arguments before Run.
  absl::Status Run(const std::string& label, const Enqueue& enqueue);

  // For Enqueue functions.
  ncclComm_t handle() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  // ncclSuccess, or ncclInProgress waited out (a non-blocking communicator
  // is still queueing the call); otherwise the error as a Status.
  absl::Status Enqueued(ncclResult_t result, const std::string& call);
  absl::Status CudaEnqueued(cudaError_t error, const std::string& call);
  // ncclGroupStart, `calls` (inside a group NCCL calls only queue, so each
  // must return ncclSuccess), ncclGroupEnd waited out like Enqueued().
  absl::Status Group(const std::string& call, const std::function<absl::Status()>& calls);
  // Page-locked host memory of at least `bytes`, kept for later ops, so
  // copies of small metadata to and from the GPU stay asynchronous (a copy to
  // pageable memory would block the thread until the GPU got there). Valid
  // until the next call; collective thread only.
  absl::StatusOr<void*> PinnedScratch(size_t bytes);

#if HVDD_NCCL_HAS_SHRINK
  // A communicator of this one's ranks without `excluded` (ranks of this
  // communicator, not our own), made from this one's connections without a
  // new unique id: ncclCommShrink. Every remaining rank calls it with the
  // same list; ranks keep their order. NCCL refuses an empty list, so an
  // empty `excluded` makes a same-size copy with ncclCommSplit (NCCL's same
  // child-communicator path); the GPU check measures it on one GPU.
  // This communicator must be healthy (a failed one was already aborted:
  // re-create instead); it stays usable.
  absl::StatusOr<std::unique_ptr<NcclComm>> Shrink(const std::vector<int>& excluded,
                                                   std::function<bool()> should_abort,
                                                   std::string name);
#endif

 private:
  explicit NcclComm(NcclCommOptions options);
  absl::Status CreateStreamAndEvents();
  bool ShouldAbort() const;
  // The communicator's asynchronous state: ncclSuccess or ncclInProgress,
  // else its error as a Status.
  absl::StatusOr<ncclResult_t> AsyncState(const std::string& label);
  // Polls `check` until it says done, fails, should_abort() turns true or the
  // timeout passes; the last three Fail().
  absl::Status Poll(const std::string& label, const std::function<absl::StatusOr<bool>()>& check);
  absl::Status WaitReady(const std::string& label);
  // Records the first failure and aborts the communicator. Returns `failure`.
  absl::Status Fail(absl::Status failure);
  void AbortHandle();

  const NcclCommOptions options_;
  // All owned by the collective thread.
  ncclComm_t comm_ = nullptr;  // null once aborted
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;  // recorded on the legacy default stream
  cudaEvent_t done_ = nullptr;          // recorded on stream_ after an op
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  absl::Status failure_;
};

// Scratch device memory for one op, allocated and freed in order on the
// communicator's stream (cudaMallocAsync / cudaFreeAsync): the free is queued
// after the op's uses, so it is safe even when the op is abandoned.
class StreamBuffer {
 public:
  static absl::StatusOr<StreamBuffer> Allocate(NcclComm& comm, size_t bytes);
  StreamBuffer(StreamBuffer&& other) noexcept;
  StreamBuffer& operator=(StreamBuffer&&) = delete;
  StreamBuffer(const StreamBuffer&) = delete;
  ~StreamBuffer();

  void* data() const { return data_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(data_); }

 private:
  StreamBuffer(cudaStream_t stream, void* data) : stream_(stream), data_(data) {}
  cudaStream_t stream_;
  void* data_;
};

}  // namespace horovodd::internal
