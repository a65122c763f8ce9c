#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) in the clang tree
# (scripts/clang_build.sh: clang, AddressSanitizer and coverage), then runs
# each for a bounded time. Exits non-zero when a target crashes, leaks or
# trips the sanitizer (its input is saved under <tree>/fuzz-artifacts/ and the
# command to replay it is printed).
#
#   FUZZ_SECONDS     seconds per target (default 20)
#   FUZZ_TARGETS     space-separated subset of the targets (default: all)
#   CLANG_BUILD_DIR  the clang tree (default: <repo>/build-clang)
#   CLANG_JOBS       parallel compile jobs (default 2)
#
# New inputs that reach new code go to <tree>/fuzz-corpus/<target>/, never
# into the seeds in tests/fuzz/corpus/ (see tests/fuzz/README.md to keep some).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CLANG_BUILD_DIR:-$repo_root/build-clang}"
seconds="${FUZZ_SECONDS:-20}"
read -r -a targets <<< "${FUZZ_TARGETS:-fuzz_host_parser fuzz_daemon_config fuzz_run_config fuzz_requests}"

echo "== fuzz: building ${targets[*]} in $build_dir"
CLANG_BUILD_DIR="$build_dir" "$repo_root/scripts/clang_build.sh" "${targets[@]}"

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
