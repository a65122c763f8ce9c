#!/bin/sh
# Builds the benchmarks (Release, in their own build dir) and runs them side by
# side with their peers; prints one table with ratios and PASS/FAIL lines for
# the targets of issues 6 and 22. Benchmarks are never run by ctest or CI.
#
#   bench/run.sh                      everything
#   bench/run.sh allreduce reset      a subset: allreduce small peers hierarchical synthetic
#                                     reset torchrun scale
#   bench/run.sh peers                OpenMPI (mpirun, openmpi-bin + libopenmpi-dev) and
#                                     torch DDP (gloo) beside raw Gloo and ours, 2 and 4
#                                     ranks, 1/16/64 MiB and the 100 x 4 KiB step
#   bench/run.sh hierarchical         2 "hosts" (127.0.0.2/3, the tests' private sshd)
#                                     x 2 ranks, 16 MiB, hierarchical vs flat TCP: on
#                                     one shared loopback, then (root) as two network
#                                     namespaces over a link of BENCH_LINK_RATE (1gbit)
#   bench/run.sh synthetic            Horovod's synthetic benchmark (ResNet-18, CPU,
#                                     batch 8, 64 px) under horovodrun vs torch DDP
#                                     (gloo), 2 ranks, images/s
#   QUICK=1 bench/run.sh              shorter loops, scale up to 4,096 workers
#   BUILD_DIR=/tmp/b bench/run.sh     another build dir (default: build-bench)
#   BENCH_SIZES=4194304 BENCH_ITERS=300 bench/run.sh allreduce
#                                     only those allreduce sizes, that many iterations
#   BENCH_ROUNDS=5 bench/run.sh allreduce scale
#                                     runs per side, interleaved, medians shown
#                                     (default 3; 1 when QUICK)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-2}

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHVDD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target horovodrun bench_gloo_raw bench_hvdd_worker \
  bench_wake_floor bench_scale_daemon bench_scale_load hvdd_python >/dev/null
exec /usr/bin/python3 "$root/bench/bench.py" "$build" "$@"
