#!/usr/bin/env bash
# The project's one clang build tree (default build-clang/): clang with
# AddressSanitizer and libFuzzer's coverage, the libFuzzer targets (tests/fuzz)
# on, the unit tests and benchmarks off. scripts/fuzz.sh builds and runs its
# fuzz targets; scripts/thread_safety.sh runs clang's lock analysis with the
# compile commands it records (compile_commands.json), so the CUDA and NCCL
# parts are configured as in the main build (every unit of src/ is there),
# though only what a target asks for is built. Built through
# scripts/build.sh, so through ccache when it is installed.
#
#   scripts/clang_build.sh TARGET...     configure, then build those targets
#
#   CLANG_BUILD_DIR  the tree (default: <repo>/build-clang)
#   CLANG_JOBS       parallel compile jobs (default 2)
#   CLANG, CLANGXX   the compilers (default clang-14 and clang++-14, else clang and clang++)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

pick() {
  for candidate in "$@"; do
    if command -v "$candidate" > /dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "clang_build.sh: none of $* found (apt-get install clang)" >&2
  exit 2
}
clang="${CLANG:-$(pick clang-14 clang)}"
clangxx="${CLANGXX:-$(pick clang++-14 clang++)}"

if [[ $# -eq 0 ]]; then
  echo "usage: scripts/clang_build.sh TARGET..." >&2
  exit 2
fi

BUILD_DIR="${CLANG_BUILD_DIR:-$repo_root/build-clang}" JOBS="${CLANG_JOBS:-2}" \
  CMAKE_ARGS="-DCMAKE_C_COMPILER=$clang -DCMAKE_CXX_COMPILER=$clangxx \
    -DHVDD_FUZZ=ON -DHVDD_BUILD_TESTS=OFF -DHVDD_BENCH=OFF" \
  exec "$repo_root/scripts/build.sh" "$@"
