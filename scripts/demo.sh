#!/usr/bin/env bash
# The elastic demo, end to end on this machine: builds horovodrun and the
# example (only those, not the tests and benchmarks), starts an
# elastic job of 2 workers (examples/elastic_train under horovodrun, hosts from
# examples/discover_hosts.sh), grows it to 4 by editing the hosts file,
# SIGKILLs one worker, and waits for training to finish anyway. Prints the
# result JSON and a one-line summary; exits non-zero if any step or the job
# failed. Every wait watches the job's output for a condition, with a deadline.
#
# It builds in a directory of its own (build-demo/), configured for a short
# build: Release without debug info, no tests, no benchmarks, and no NCCL
# kernel (the demo runs on CPUs; nvcc compiling it for five GPU generations
# is a large part of a full build). scripts/test.sh keeps build/.
#
# Environment: BUILD_DIR (default build-demo/), STEP_DELAY_MS (default 40: the
# per-step sleep that leaves time for membership changes mid-run).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$repo_root/build-demo}"
step_delay_ms="${STEP_DELAY_MS:-40}"

say() { echo "== $*"; }
fail() {
  echo "demo FAILED: $*" >&2
  exit 1
}

say "installing missing packages and building horovodrun and elastic_train in $BUILD_DIR"
"$repo_root/scripts/install_deps.sh"
CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DHVDD_BUILD_TESTS=OFF -DHVDD_BENCH=OFF -DHVDD_WITH_NCCL=OFF" \
  "$repo_root/scripts/build.sh" horovodrun elastic_train

horovodrun="$BUILD_DIR/bin/horovodrun"
elastic_train="$BUILD_DIR/examples/elastic_train"
discover_hosts="$repo_root/examples/discover_hosts.sh"
for binary in "$horovodrun" "$elastic_train"; do
  [[ -x "$binary" ]] || fail "$binary was not built"
done

workdir="$(mktemp -d "${TMPDIR:-/tmp}/horovodd-demo.XXXXXX")"
log="$workdir/job.log"
export HOSTS_FILE="$workdir/hosts.txt"
job_pid=""
tail_pid=""
succeeded=0

# Ends what this script started (by PID) and keeps the work directory, with
# the job's log, when something failed.
cleanup() {
  if [[ -n "$job_pid" ]] && job_running; then
    kill -TERM "$job_pid" 2>/dev/null || true
    wait "$job_pid" 2>/dev/null || true
  fi
  if [[ -n "$tail_pid" ]]; then
    kill "$tail_pid" 2>/dev/null || true
  fi
  if [[ $succeeded -eq 1 ]]; then
    rm -rf "$workdir"
  else
    echo "the job's files are kept in $workdir (log: $log)" >&2
  fi
}
trap cleanup EXIT

# True while horovodrun runs (a finished but not yet reaped child is a zombie).
job_running() {
  local state
  state="$(awk '{print $3}' "/proc/$job_pid/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# Replaces the hosts file in one rename, so discovery never reads half of it.
set_hosts() {
  printf '%s\n' "$1" > "$HOSTS_FILE.tmp"
  mv "$HOSTS_FILE.tmp" "$HOSTS_FILE"
}

# wait_for_line REGEX SECONDS WHAT: waits until the job's output has a line
# matching REGEX; fails if the job ends first or the deadline passes.
wait_for_line() {
  local pattern="$1" deadline=$((SECONDS + $2)) what="$3"
  until grep -Eq -- "$pattern" "$log"; do
    job_running || fail "the job ended before $what"
    ((SECONDS < deadline)) || fail "no sign of $what after $2 s"
    sleep 0.2
  done
}

# The PID printed by the newest "rank R/S generation G pid P" line for R/S.
worker_pid() {
  grep -Eo -- "rank $1 generation [0-9]+ pid [0-9]+" "$log" | tail -n 1 | awk '{print $NF}'
}

say "starting an elastic job of 2 workers (min 2, max 4) in $workdir"
set_hosts "localhost:2"
cd "$workdir"
"$horovodrun" -np 2 --min-np 2 --max-np 4 --host-discovery-script "$discover_hosts" \
  "$elastic_train" --epochs 3 --step-delay-ms "$step_delay_ms" --output result.json \
  > "$log" 2>&1 &
job_pid=$!
# Show the job's output as it comes, indented under the narration.
tail --pid="$job_pid" -n +1 -f "$log" > >(sed -u 's/^/    | /') &
tail_pid=$!

wait_for_line 'rank [0-9]+/2 generation [0-9]+ pid [0-9]+' 120 "the first 2 workers starting"
say "the job runs with 2 workers"

say "growing the hosts file to 4 slots"
set_hosts "localhost:4"
wait_for_line 'rank 3/4 generation [0-9]+ pid [0-9]+' 120 "the job growing to 4 workers"
say "the job runs with 4 workers"

victim="$(worker_pid 1/4)"
[[ -n "$victim" ]] || fail "no PID printed for rank 1 of 4"
grep -q elastic_train "/proc/$victim/cmdline" 2>/dev/null ||
  fail "PID $victim (rank 1 of 4) is not a running elastic_train worker"
say "killing rank 1 (pid $victim) with SIGKILL"
kill -KILL "$victim"

say "waiting for the job to finish"
deadline=$((SECONDS + 600))
while job_running; do
  ((SECONDS < deadline)) || fail "the job did not finish within 600 s"
  sleep 0.5
done
job_rc=0
wait "$job_pid" || job_rc=$?
job_pid=""
wait "$tail_pid" 2>/dev/null || true
tail_pid=""

[[ $job_rc -eq 0 ]] || fail "horovodrun exited with $job_rc"
[[ -f result.json ]] || fail "the job exited 0 but wrote no result.json"
say "result.json"
cat result.json
summary="$(python3 - result.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['resets']} resets, final size {r['final_size']}, "
      f"samples per epoch {r['samples_per_epoch']}, weight_error {r['weight_error']:.4g}")
PY
)"
say "job finished: exit $job_rc, $summary"
succeeded=1
