#!/usr/bin/env bash
# The GPU check of the NCCL backend (issue 8), for a machine with one GPU.
# Runs, each step under its own time limit, and prints a summary table:
#   1. the unit tests of the GPU path (test_nccl, and test_nccl_gpu: its cases
#      need the GPU, and it exits 77 without one);
#   2. every collective and dtype on one-rank NCCL against CPU-computed values,
#      errors, and the runtime's dispatch (NCCL and staging through Gloo);
#   3. $CYCLES create/allreduce/abort cycles of a communicator, and as many
#      shrink cycles (median and p90 of each);
#   4. an op stuck in flight, aborted by a (simulated) daemon notice;
#   5. the elastic example at one rank under horovodrun: on the CPU, then with
#      its gradient sums on the GPU through NCCL and through staged Gloo; all
#      three must train to the same result.
# Exits non-zero if any step failed (2 if there is no GPU at all).
#
# Binaries come from a bundle that tests/gpu/make_bundle.sh prepared on a
# build machine (used when it exists: $GPU_BUNDLE, default
# build-nccl/gpu-bundle), else from building here: scripts/install_deps.sh,
# then only the needed targets into $BUILD_DIR (default build-gpu/).
#
# Every step has its own time limit, and all of them together stay within
# TOTAL_LIMIT_S (default 450: the script ends within 8 minutes, summary
# included, whatever hangs).
#
# Environment: GPU_BUNDLE, BUILD_DIR, CYCLES (default 50), JOBS (default
# nproc), TOTAL_LIMIT_S, LOG_DIR (where the summary and the full log are
# written; default a new directory under /tmp).
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cycles="${CYCLES:-50}"
jobs="${JOBS:-$(nproc)}"
log_dir="${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/hvdd-gpu-check.XXXXXX")}"
mkdir -p "$log_dir"
full_log="$log_dir/gpu_check.log"
summary="$log_dir/gpu_summary.txt"
: > "$full_log"
started_at=$SECONDS
deadline=$((SECONDS + ${TOTAL_LIMIT_S:-450}))

rows=()    # "step|result|seconds|notes"
failed=0

say() { echo "== $*" | tee -a "$full_log"; }

# run_step NAME LIMIT_S COMMAND...: runs COMMAND (a program, or a function of
# this script) with its output in the full log and in $log_dir/last.log;
# records PASS/FAIL (SKIP for exit 2 with a SKIP line).
run_step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((deadline - SECONDS))
  ((limit <= left)) || limit=$left
  if ((limit < 5)); then
    say "$name: skipped, the time is up"
    rows+=("$name|FAIL(no time)|0|TOTAL_LIMIT_S reached")
    failed=1
    return 1
  fi
  say "$name (limit ${limit}s): $*"
  local begin=$SECONDS rc=0
  if [[ $(type -t "$1") == function ]]; then
    # timeout runs programs: hand the function to a child bash.
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); \"\$@\"" _ "$@" \
      > "$log_dir/last.log" 2>&1 || rc=$?
  else
    timeout --kill-after=10 "$limit" "$@" > "$log_dir/last.log" 2>&1 || rc=$?
  fi
  cat "$log_dir/last.log" >> "$full_log"
  local result=PASS
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    result="FAIL(timeout)"
  elif [[ $rc -eq 2 ]] && grep -q '^SKIP' "$log_dir/last.log"; then
    result=SKIP
  elif [[ $rc -ne 0 ]]; then
    result="FAIL(rc=$rc)"
  fi
  [[ $result == PASS || $result == SKIP ]] || failed=1
  local notes
  notes="$(grep -E '^(SUMMARY|FAIL)' "$log_dir/last.log" | head -n 3 | tr '\n' ';')"
  if [[ -z $notes && $result != PASS ]]; then
    notes="$(grep -v '^[[:space:]]*$' "$log_dir/last.log" | tail -n 1)"
  fi
  rows+=("$name|$result|$((SECONDS - begin))|${notes:0:150}")
  tail -n 5 "$log_dir/last.log"
  [[ $result == PASS || $result == SKIP ]]
}

print_summary() {
  {
    echo
    echo "== GPU check summary ($((SECONDS - started_at)) s in all)"
    printf '%-36s %-14s %7s  %s\n' step result seconds notes
    local row
    for row in "${rows[@]}"; do
      IFS='|' read -r name result seconds notes <<< "$row"
      printf '%-36s %-14s %7s  %s\n' "$name" "$result" "$seconds" "$notes"
    done
    echo
    grep -h -E '^(TIMING|INFO)' "$full_log" | sort -u
    grep -h -E '^FAIL ' "$full_log" | head -n 20
    echo
    if [[ $failed -eq 0 ]]; then echo "GPU CHECK PASSED"; else echo "GPU CHECK FAILED"; fi
    echo "logs: $full_log"
  } | tee "$summary"
}
trap print_summary EXIT

export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
# One process, one GPU: NCCL's bootstrap only needs loopback.
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"

say "machine"
{ nvidia-smi -L 2>/dev/null || echo "nvidia-smi not available"; uname -m; } | tee -a "$full_log"

# The directory of a libnccl.so.2 this machine has, for binaries built elsewhere.
find_nccl_dir() {
  local candidate
  for candidate in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/*/lib \
      /usr/lib/x86_64-linux-gnu /usr/local/nccl/lib; do
    if [[ -e "$candidate/libnccl.so.2" ]]; then
      echo "$candidate"
      return 0
    fi
  done
  local python_dir
  for python in python3 /usr/bin/python3; do
    python_dir="$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)" || continue
    if [[ -e "$python_dir/libnccl.so.2" ]]; then
      echo "$python_dir"
      return 0
    fi
  done
  find / -xdev -name 'libnccl.so.2' -printf '%h\n' 2>/dev/null | head -n 1
}

bundle="${GPU_BUNDLE:-$repo_root/build-nccl/gpu-bundle}"
if [[ -x "$bundle/bin/test_gpu_check" ]]; then
  bin="$bundle/bin"
  nccl_dir="$(find_nccl_dir)"
  say "using the prebuilt bundle $bundle; NCCL from ${nccl_dir:-nowhere}"
  cat "$bundle/bundle.txt" 2>/dev/null | tee -a "$full_log"
  fingerprint="$(bash "$repo_root/tests/gpu/make_bundle.sh" --fingerprint 2>/dev/null)"
  if ! grep -qx "sources $fingerprint" "$bundle/bundle.txt" 2>/dev/null; then
    say "WARNING: the GPU sources changed since the bundle was made; rerun tests/gpu/make_bundle.sh"
    rows+=("bundle matches sources|WARN|0|rerun make_bundle.sh")
  fi
  export LD_LIBRARY_PATH="$bundle/lib${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # This machine's C++ runtime is normally newer; fall back to the bundled one.
  if ! "$bin/elastic_train" --help > /dev/null 2>&1; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$bundle/lib-cxx"
    say "the binaries need the bundled C++ runtime:"
    "$bin/elastic_train" --help 2>&1 | head -n 3 | tee -a "$full_log"
  fi
  rows+=("binaries|PASS|0|prebuilt bundle")
  test_nccl="$bin/test_nccl"
  test_nccl_gpu="$bin/test_nccl_gpu"
  gpu_check="$bin/test_gpu_check"
  horovodrun="$bin/horovodrun"
  elastic_train="$bin/elastic_train"
else
  build_dir="${BUILD_DIR:-$repo_root/build-gpu}"
  cuda_root=/usr/local/cuda
  if ! [[ -x "$cuda_root/bin/nvcc" ]] && command -v nvcc > /dev/null; then
    cuda_root="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
  fi
  if ! run_step "install packages" 240 bash "$repo_root/scripts/install_deps.sh"; then
    say "cannot install the build packages here: prepare a bundle on a build machine" \
      "(tests/gpu/make_bundle.sh) and bring build-nccl/gpu-bundle along"
    exit 1
  fi
  run_step "configure" 120 cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DHVDD_WITH_NCCL=ON -DCUDAToolkit_ROOT="$cuda_root" -DHVDD_CUDA_ARCHITECTURES=90 || exit 1
  run_step "build" 420 cmake --build "$build_dir" -j "$jobs" \
    --target test_gpu_check test_nccl test_nccl_gpu elastic_train horovodrun || exit 1
  test_nccl="$build_dir/tests/unit/test_nccl"
  test_nccl_gpu="$build_dir/tests/unit/test_nccl_gpu"
  gpu_check="$build_dir/tests/gpu/test_gpu_check"
  horovodrun="$build_dir/bin/horovodrun"
  elastic_train="$build_dir/examples/elastic_train"
fi

run_step "unit tests (test_nccl)" 90 "$test_nccl"
run_step "unit tests on the GPU (test_nccl_gpu)" 90 "$test_nccl_gpu"
run_step "collectives (all ops, dtypes)" 90 "$gpu_check" collectives
if grep -q '^SKIP' "$log_dir/last.log"; then
  say "no GPU here: nothing else to check"
  failed=1
  exit 2
fi
run_step "$cycles abort/rebuild cycles" 150 "$gpu_check" cycles "$cycles"
run_step "abort of an op in flight" 60 "$gpu_check" abort

# The elastic example at one rank; rank 0 writes result-<name>.json.
export work="$log_dir/example" horovodrun elastic_train
mkdir -p "$work"
example() {
  local name="$1" device="$2" operations="$3"
  (cd "$work" && "$horovodrun" -np 1 -H localhost:1 --env "HOROVOD_GPU_OPERATIONS=$operations" \
    "$elastic_train" --device "$device" --epochs 2 --samples 2048 \
    --output "$work/result-$name.json")
}
run_step "example on the CPU" 60 example cpu cpu gloo
run_step "example on the GPU via NCCL" 60 example nccl cuda nccl
run_step "example on the GPU via Gloo staging" 60 example gloo cuda gloo
same_results() {
  local reference="$work/result-cpu.json" other
  [[ -s "$reference" ]] || { echo "no $reference"; return 1; }
  cat "$reference"
  for other in "$work/result-nccl.json" "$work/result-gloo.json"; do
    [[ -s "$other" ]] || { echo "no $other"; return 1; }
    cmp "$reference" "$other" || { echo "$other differs:"; cat "$other"; return 1; }
  done
  echo "the GPU runs trained exactly as the CPU run"
}
run_step "examples agree (CPU = NCCL = Gloo)" 10 same_results
exit "$failed"
