#!/usr/bin/env bash
# Configures (RelWithDebInfo) and builds, incrementally, in $BUILD_DIR
# (default: build/ at the repository root): the whole project, or with
# arguments only those targets and what they need (scripts/demo.sh builds
# `horovodrun elastic_train`, not the tests and benchmarks). Parallel jobs:
# $JOBS, default the number of CPUs. $CMAKE_ARGS: more configure arguments
# (later ones win, e.g. -DCMAKE_BUILD_TYPE=Release). compile_commands.json is
# written for scripts/thread_safety.sh.
#   scripts/build.sh                          everything (scripts/test.sh)
#   scripts/build.sh horovodrun elastic_train  just those
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo_root/build}"
jobs="${JOBS:-$(nproc)}"

cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  ${CMAKE_ARGS:-}
if [[ $# -eq 0 ]]; then
  cmake --build "$build_dir" -j "$jobs"
else
  cmake --build "$build_dir" -j "$jobs" --target "$@"
fi
