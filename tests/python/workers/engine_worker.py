"""Runs under horovodrun (numpy only, no torch) against the _horovodd module
itself, the C++ half of the package: the engine's features as the binding
offers them, so these checks do not depend on the Python wrappers.

  dtypes          int8, int16, bool and bfloat16 (its bits as int16) through
                  allreduce, broadcast, allgather and alltoall; bool refused
                  by allreduce with Horovod's rule.
  init-cycles N   init -> allreduce -> shutdown, N times; prints how long the
                  slowest cycle took.
  join STEPS      rank r runs STEPS[r] allreduces (Sum and Average), then
                  joins; checks every result against what the ranks still
                  in contributed, and the rank join() returns.
  join-allgather  rank 0 joins at once; the others' allgather fails with
                  Horovod's rule (only allreduce runs while ranks have
                  joined), then they join too.
  process-sets    a set of ranks [0, 2] (at 3 ranks) added at run time,
                  collectives on it and on the global set interleaved, a
                  non-member's error, then removed.
  stall           rank 1 enqueues a tensor late (after SECONDS) so rank 0
                  waits on it.
  timeline FILE   a few named allreduces between start_timeline and
                  stop_timeline.

Each rank prints "rank R: <outcome>" lines the test reads, and exits
non-zero on a mismatch."""

import sys
import time

import numpy as np

from horovodd import _horovodd as hvd


def ref(array):
    return hvd.TensorRef(array.__array_interface__["data"][0], array.dtype.name,
                         list(array.shape))


def bf16_ref(bits):
    """A TensorRef to int16 storage holding bfloat16 bit patterns."""
    return hvd.TensorRef(bits.__array_interface__["data"][0], "bfloat16", list(bits.shape))


def to_bf16_bits(values):
    as_u32 = np.asarray(values, dtype=np.float32).view(np.uint32)
    # Round to nearest even, as FloatToBFloat16 does.
    rounded = (as_u32 + 0x7FFF + ((as_u32 >> 16) & 1)) >> 16
    return rounded.astype(np.uint16).view(np.int16)


def from_bf16_bits(bits):
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def check(condition, what):
    if not condition:
        print(f"rank {hvd.rank()}: MISMATCH {what}", flush=True)
        sys.exit(1)


def dtypes():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for dtype in ("int8", "int16"):
        value = np.full(5, rank + 1, dtype=dtype)
        hvd.allreduce_(ref(value), hvd.ReduceOp.Sum, name=f"sum-{dtype}")
        check((value == sum(range(1, size + 1))).all(), f"{dtype} sum {value}")
        value = np.full(5, -(rank + 1), dtype=dtype)
        hvd.allreduce_(ref(value), hvd.ReduceOp.Min, name=f"min-{dtype}")
        check((value == -size).all(), f"{dtype} min {value}")
        value = np.full(3, rank * 10, dtype=dtype)
        hvd.broadcast_(ref(value), size - 1)
        check((value == (size - 1) * 10).all(), f"{dtype} broadcast {value}")
        gathered = hvd.allgather(ref(np.full((1, 2), rank, dtype=dtype)))
        check(gathered.dtype == np.dtype(dtype), f"{dtype} allgather dtype {gathered.dtype}")
        check((gathered[:, 0] == np.arange(size)).all(), f"{dtype} allgather {gathered}")

    bits = to_bf16_bits([1.5 * (rank + 1), -0.25])
    hvd.allreduce_(bf16_ref(bits), hvd.ReduceOp.Sum, name="sum-bf16")
    check(np.allclose(from_bf16_bits(bits), [1.5 * sum(range(1, size + 1)), -0.25 * size]),
          f"bfloat16 sum {from_bf16_bits(bits)}")
    bits = to_bf16_bits([2.0 * rank])
    hvd.allreduce_(bf16_ref(bits), hvd.ReduceOp.Average, name="avg-bf16")
    check(np.allclose(from_bf16_bits(bits), [2.0 * (size - 1) / 2]), "bfloat16 average")
    gathered = hvd.allgather(bf16_ref(to_bf16_bits([rank + 0.5])))
    check(gathered.dtype == np.int16, f"bfloat16 allgather comes back as int16 bits")
    check(np.allclose(from_bf16_bits(gathered), np.arange(size) + 0.5), "bfloat16 allgather")

    flags = np.array([rank == 0, True, False])
    hvd.broadcast_(ref(flags), 0)
    check(flags.tolist() == [True, True, False], f"bool broadcast {flags}")
    gathered = hvd.allgather(ref(np.array([rank % 2 == 1])))
    check(gathered.dtype == np.bool_, f"bool allgather dtype {gathered.dtype}")
    check(gathered.tolist() == [r % 2 == 1 for r in range(size)], f"bool allgather {gathered}")
    received, splits = hvd.alltoall(ref(np.array([True] * size)))
    check(received.dtype == np.bool_ and received.all() and list(splits) == [1] * size,
          "bool alltoall")
    try:
        hvd.allreduce_(ref(np.array([True])), hvd.ReduceOp.Sum, name="bool-sum")
    except Exception as error:  # noqa: BLE001 -- the type is pyapi's to choose
        print(f"rank {rank}: bool allreduce refused: {error}", flush=True)
    else:
        check(False, "a bool allreduce was accepted")
    print(f"rank {rank}: dtypes ok", flush=True)
    hvd.shutdown()


def init_cycles(cycles):
    slowest = 0.0
    for cycle in range(cycles):
        started = time.monotonic()
        hvd.init()
        value = np.array([hvd.rank() + 1.0])
        hvd.allreduce_(ref(value), hvd.ReduceOp.Sum, name="cycle")
        check(value[0] == sum(range(1, hvd.size() + 1)), f"cycle {cycle}: {value}")
        rank = hvd.rank()
        hvd.shutdown()
        slowest = max(slowest, time.monotonic() - started)
        print(f"rank {rank}: cycle {cycle} ok", flush=True)
    print(f"rank {rank}: slowest cycle {slowest:.3f} s", flush=True)


def join(steps):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for step in range(steps[rank]):
        contributors = [r for r in range(size) if steps[r] > step]
        total = np.array([float(rank + 1), 2.0], dtype=np.float32)
        hvd.allreduce_(ref(total), hvd.ReduceOp.Sum, name="loss")
        want = sum(r + 1 for r in contributors)
        check(total.tolist() == [want, 2.0 * len(contributors)], f"step {step} sum {total}")
        mean = np.array([float(rank + 1)], dtype=np.float64)
        hvd.allreduce_(ref(mean), hvd.ReduceOp.Average, name="metric")
        # Horovod's average: the sum (joined ranks gave zeros) times 1 / size.
        check(abs(mean[0] - want / size) < 1e-9, f"step {step} average {mean}")
        ints = np.array([rank + 1], dtype=np.int32)
        hvd.allreduce_(ref(ints), hvd.ReduceOp.Average, name="count")
        check(ints[0] == int(want * (1.0 / size)), f"step {step} int average {ints}")
    last = hvd.join()
    last_expected = max(range(size), key=lambda r: (steps[r], r))
    print(f"rank {rank}: joined after {steps[rank]} steps, last to join {last}", flush=True)
    check(steps.count(max(steps)) > 1 or last == last_expected,
          f"join returned {last}, expected {last_expected}")
    # Everyone is back: a plain allreduce works again.
    after = np.array([1.0])
    hvd.allreduce_(ref(after), hvd.ReduceOp.Sum, name="after-join")
    check(after[0] == size, f"after join {after}")
    print(f"rank {rank}: join ok", flush=True)
    hvd.shutdown()


def join_allgather():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if rank > 0:
        rows = np.full((2, 3), float(rank), dtype=np.float32)
        try:
            hvd.allgather(ref(rows))
            outcome = "allgather returned"
        except RuntimeError as error:
            outcome = f"{type(error).__name__}: {error}"
        print(f"rank {rank}: {outcome}", flush=True)
    last = hvd.join()
    check(0 <= last < size, f"join returned {last}")
    after = np.array([1.0])
    hvd.allreduce_(ref(after), hvd.ReduceOp.Sum, name="after-join")
    check(after[0] == size, f"after join {after}")
    print(f"rank {rank}: join ok", flush=True)
    hvd.shutdown()


def process_sets():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    members = [0, size - 1]
    set_id = hvd.add_process_set(members)
    check(set_id == 1, f"the first added process set has id {set_id}")
    check(hvd.process_set_ranks(set_id) == members, "process_set_ranks")
    check(hvd.process_set_ranks(0) == list(range(size)), "the global set's ranks")
    for step in range(3):
        everyone = np.array([rank + 1.0])
        hvd.allreduce_(ref(everyone), hvd.ReduceOp.Sum, name="global",
                       process_set_id=0)
        check(everyone[0] == sum(range(1, size + 1)), f"global step {step}: {everyone}")
        if rank in members:
            some = np.array([rank + 1.0])
            hvd.allreduce_(ref(some), hvd.ReduceOp.Sum, name="subset",
                           process_set_id=set_id)
            check(some[0] == sum(m + 1 for m in members), f"set step {step}: {some}")
            handle = hvd.allreduce_async_(ref(some), hvd.ReduceOp.Average, name="subset-async",
                                          process_set_id=set_id)
            handle.wait()
            gathered = hvd.allgather(ref(np.array([[rank]], dtype=np.int64)),
                                     process_set_id=set_id)
            check(gathered[:, 0].tolist() == members, f"set allgather {gathered}")
            value = np.array([rank], dtype=np.int32)
            hvd.broadcast_(ref(value), members[1], process_set_id=set_id)
            check(value[0] == members[1], "set broadcast from the set's second rank")
            hvd.barrier(process_set_id=set_id)
        else:
            try:
                hvd.allreduce_(ref(np.array([1.0])), hvd.ReduceOp.Sum, name="subset",
                               process_set_id=set_id)
            except Exception as error:  # noqa: BLE001
                if step == 0:
                    print(f"rank {rank}: not a member: {error}", flush=True)
            else:
                check(False, "a non-member ran a collective on the set")
    # The host's segments this worker maps: the global ring's, and the set
    # ring's for its members (all ranks share this host).
    with open("/proc/self/maps") as maps:
        inodes = {line.split()[4] for line in maps if "/memfd:horovodd-shm" in line}
    print(f"rank {rank}: shared-memory segments {len(inodes)}", flush=True)
    hvd.remove_process_set(set_id)
    try:
        hvd.process_set_ranks(set_id)
    except Exception as error:  # noqa: BLE001
        print(f"rank {rank}: after removal: {error}", flush=True)
    else:
        check(False, "a removed set still has ranks")
    print(f"rank {rank}: process sets ok", flush=True)
    hvd.shutdown()


def stall(seconds):
    hvd.init()
    rank = hvd.rank()
    if rank == 1:
        time.sleep(seconds)
    value = np.array([1.0])
    try:
        hvd.allreduce_(ref(value), hvd.ReduceOp.Sum, name="late.tensor")
        print(f"rank {rank}: late tensor reduced to {value[0]}", flush=True)
    except Exception as error:  # noqa: BLE001
        print(f"rank {rank}: late tensor failed: {error}", flush=True)
        sys.exit(3)
    hvd.shutdown()


def timeline(path):
    hvd.init()
    rank = hvd.rank()
    hvd.start_timeline(path, True)
    for step in range(3):
        for name in ("grad.a", "grad.b"):
            value = np.ones(1000, dtype=np.float32)
            hvd.allreduce_(ref(value), hvd.ReduceOp.Sum, name=name)
        arrays = [np.ones(10, dtype=np.float32) for _ in range(3)]  # alive until waited
        handles = [hvd.allreduce_async_(ref(a), hvd.ReduceOp.Sum, name=f"fused.{i}")
                   for i, a in enumerate(arrays)]
        for handle in handles:
            handle.wait()
    hvd.stop_timeline()
    print(f"rank {rank}: timeline ok", flush=True)
    hvd.shutdown()


def main():
    mode = sys.argv[1]
    if mode == "dtypes":
        dtypes()
    elif mode == "init-cycles":
        init_cycles(int(sys.argv[2]))
    elif mode == "join":
        join([int(s) for s in sys.argv[2].split(",")])
    elif mode == "join-allgather":
        join_allgather()
    elif mode == "process-sets":
        process_sets()
    elif mode == "stall":
        stall(float(sys.argv[2]))
    elif mode == "timeline":
        timeline(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
