#!/usr/bin/env bash
# Configures (RelWithDebInfo) and builds, incrementally, in $BUILD_DIR
# (default: build/ at the repository root): the whole project, or with
# arguments only those targets and what they need (scripts/demo.sh builds
# `horovodrun elastic_train`, not the tests and benchmarks). Parallel jobs:
# $JOBS, default the number of CPUs. $CMAKE_ARGS: more configure arguments
# (later ones win, e.g. -DCMAKE_BUILD_TYPE=Release). Each tree gets a
# compile_commands.json: scripts/thread_safety.sh reads the clang tree's
# (scripts/clang_build.sh, which builds through this script too).
#
# Every compile goes through ccache when it is installed (scripts/install_deps.sh
# installs it), with paths taken relative to the repository, so a fresh clone
# or a second build directory on a machine that built before recompiles only
# what changed. Without ccache the build is the same, uncached.
#   scripts/build.sh                          everything (scripts/test.sh)
#   scripts/build.sh horovodrun elastic_train  just those
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo_root/build}"
jobs="${JOBS:-$(nproc)}"

# An empty launcher clears one a build dir may have recorded when ccache was there.
launcher=""
if command -v ccache > /dev/null; then
  launcher=ccache
  # Paths under the checkout are hashed relative to it, unless ccache's config
  # names a base_dir of its own, so clones in other places share entries; and
  # the build directory's path is left out of the hash of builds with debug
  # info (RelWithDebInfo), which ccache would otherwise add.
  if [[ -z "${CCACHE_BASEDIR:-}" && -z "$(ccache --get-config base_dir 2> /dev/null)" ]]; then
    export CCACHE_BASEDIR="$repo_root"
  fi
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi

cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
  ${CMAKE_ARGS:-}
if [[ $# -eq 0 ]]; then
  cmake --build "$build_dir" -j "$jobs"
else
  cmake --build "$build_dir" -j "$jobs" --target "$@"
fi
