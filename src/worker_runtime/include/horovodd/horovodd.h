// The worker runtime's API for training code: join the job, learn your rank,
// run collectives. Everything here talks to the daemon that launched this
// process (found through the environment horovodd sets) and to the job's other
// workers over Gloo rings.
//
// Every function may be called only between Init() and Shutdown(), from one
// thread at a time (the training thread). Collective failures come back as
// Status: UNAVAILABLE when a peer was lost, ABORTED when the job's membership
// changed under the collective. Inside elastic::Run those are handled for you.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"

namespace horovodd {

// Connects to the daemon (HOROVODD_DAEMON_ADDR, HOROVODD_JOB_ID,
// HOROVODD_WORKER_ID, HOROVODD_WORKER_TOKEN), joins the job's current
// generation and builds the rings. If this worker is not wanted in the job
// any more, the process exits 0 (the daemon counts it as removed).
absl::Status Init();
// Leaves the rings and closes the daemon connection. Idempotent.
void Shutdown();
bool IsInitialized();

// This worker's place in the current generation.
int Rank();
int Size();
int LocalRank();  // among the workers on this host
int LocalSize();
int CrossRank();  // index of this host among hosts that have this local rank
int CrossSize();
int64_t Generation();

// Every collective runs among the ranks of one process set
// (process_sets.h): `process_set_id` (options.process_set_id for
// allreduce), 0 for every rank. Ranks in the arguments (a broadcast's root)
// are ranks of the job; positions in results (allgather's, alltoall's
// splits) follow the set's ranks in order.

// In place: every rank ends with the reduction of all ranks' inout.
absl::Status Allreduce(TensorView inout, const AllreduceOptions& options = {});
// Concatenation along the first dimension, in rank order; ranks may
// contribute different first dimensions.
absl::StatusOr<Tensor> Allgather(const TensorView& input, int process_set_id = 0);
// In place: every rank ends with root's inout.
absl::Status Broadcast(TensorView inout, int root, int process_set_id = 0);
// splits[i] first-dimension rows go to rank i (empty: equal split). The
// result holds the rows received, from rank 0 up; received_splits (optional)
// says how many came from each rank.
absl::StatusOr<Tensor> Alltoall(const TensorView& input, const std::vector<int64_t>& splits = {},
                                std::vector<int64_t>* received_splits = nullptr,
                                int process_set_id = 0);
// Reduces across ranks, then rank r keeps its share of the first dimension
// (as even as possible; the first rows % size ranks get one more row).
absl::StatusOr<Tensor> Reducescatter(const TensorView& input, ReduceOp op = ReduceOp::kAverage,
                                     int process_set_id = 0);
absl::Status Barrier(int process_set_id = 0);

// Horovod's join: this rank is out of data. Until every rank has called it,
// the other ranks' allreduces go on, this rank taking part with zeros (an
// average divides by the ranks that contributed); any other collective
// fails while ranks have joined. Returns, on every rank, the last rank to
// join. Global set only.
absl::StatusOr<int> Join();

// Horovod's timeline: rank 0 writes a Chrome trace event file (load it in
// chrome://tracing or Perfetto) of every collective from now on: per tensor
// its negotiation, its wait for its batch, and the collective, with the
// batch it was fused into; `mark_cycles` adds an event per negotiation
// round. Every rank may call it; only rank 0 writes. Init() starts one when
// HOROVOD_TIMELINE names a file (HOROVOD_TIMELINE_MARK_CYCLES=1 marks
// cycles). A second start replaces the first. UNAVAILABLE when the file
// cannot be written.
absl::Status StartTimeline(const std::string& path, bool mark_cycles = false);
// Ends the timeline and completes its file; nothing when none runs.
absl::Status StopTimeline();

}  // namespace horovodd
