#!/usr/bin/env bash
# Configures (RelWithDebInfo) and builds the whole project, incrementally, in
# $BUILD_DIR (default: build/ at the repository root). Parallel jobs: $JOBS,
# default the number of CPUs. compile_commands.json is written for
# scripts/thread_safety.sh.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo_root/build}"
jobs="${JOBS:-$(nproc)}"

cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
cmake --build "$build_dir" -j "$jobs"
