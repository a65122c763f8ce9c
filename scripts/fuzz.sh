#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, AddressSanitizer and
# coverage in build-fuzz, then runs each for a bounded time. Exits non-zero
# when a target crashes, leaks or trips the sanitizer (its input is saved
# under build-fuzz/fuzz-artifacts/ and the command to replay it is printed).
#
#   FUZZ_SECONDS   seconds per target (default 20)
#   FUZZ_TARGETS   space-separated subset of the targets (default: all)
#   FUZZ_BUILD_DIR build directory (default: <repo>/build-fuzz)
#   FUZZ_JOBS      parallel compile jobs (default 2)
#
# New inputs that reach new code go to build-fuzz/fuzz-corpus/<target>/, never
# into the seeds in tests/fuzz/corpus/ (see tests/fuzz/README.md to keep some).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${FUZZ_BUILD_DIR:-$repo_root/build-fuzz}"
seconds="${FUZZ_SECONDS:-20}"
jobs="${FUZZ_JOBS:-2}"
read -r -a targets <<< "${FUZZ_TARGETS:-fuzz_host_parser fuzz_daemon_config fuzz_run_config fuzz_requests}"

for tool in clang clang++; do
  if ! command -v "$tool" > /dev/null; then
    echo "fuzz.sh: $tool not found (apt-get install clang)" >&2
    exit 2
  fi
done

echo "== fuzz: configuring $build_dir with clang"
mkdir -p "$build_dir"
# Only what the fuzz targets need is built; tests, benchmarks and the CUDA
# parts are left out of the configuration to keep it short.
cmake -S "$repo_root" -B "$build_dir" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHVDD_FUZZ=ON -DHVDD_BUILD_TESTS=OFF -DHVDD_BENCH=OFF \
  -DHVDD_WITH_NCCL=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON > "$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log" >&2
  exit 2
}
echo "== fuzz: building ${targets[*]}"
cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}"

failed=()
for target in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$target"
  artifacts="$build_dir/fuzz-artifacts"
  mkdir -p "$corpus" "$artifacts"
  echo "== fuzz: $target for ${seconds}s"
  # The first corpus dir receives new inputs; the seeds are only read.
  # -timeout: one input running this long is a hang (a failure too).
  if ! "$build_dir/fuzz/$target" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
      "$corpus" "$repo_root/tests/fuzz/corpus/$target" > "$build_dir/fuzz-$target.log" 2>&1; then
    tail -n 60 "$build_dir/fuzz-$target.log" >&2
    echo "fuzz.sh: $target FAILED; replay: $build_dir/fuzz/$target $artifacts/$target-*" >&2
    failed+=("$target")
  else
    grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" "$build_dir/fuzz-$target.log" || true
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s without a failure"
