#!/bin/sh
# Builds the benchmarks (Release, in their own build dir) and runs them side by
# side with their peers; prints one table with ratios and PASS/FAIL lines for
# the targets of issue 6. Benchmarks are never run by ctest or CI.
#
#   bench/run.sh                      everything
#   bench/run.sh allreduce reset      a subset: allreduce small reset torchrun scale
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
  bench_scale_daemon bench_scale_load >/dev/null
exec /usr/bin/python3 "$root/bench/bench.py" "$build" "$@"
