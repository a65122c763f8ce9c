#!/usr/bin/env bash
# Everything CI runs: installs missing packages, checks the C++ formatting
# (scripts/check_format.sh), builds build/ with clang and its lock analysis
# (HVDD_THREAD_SAFETY: a -Wthread-safety finding fails the build; incrementally,
# through ccache when it is installed), runs the unit tests with ctest, then
# the integration tests with pytest, then a short fuzz run of the libFuzzer
# targets in the clang tree build-clang/ (scripts/fuzz.sh).
# Every stage runs even when an earlier one fails; exits non-zero if any failed.
# $BUILD_DIR overrides the build directory (exported as HVDD_BUILD_DIR for the
# integration tests).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$repo_root/build}"
export HVDD_BUILD_DIR="$BUILD_DIR"

# Each stage says how long it took, so the slow ones are plain in CI's log.
stage_began=$SECONDS
stage_took() {
  echo "== $1 took $((SECONDS - stage_began)) s"
  stage_began=$SECONDS
}

"$repo_root/scripts/install_deps.sh"
stage_took "installing packages"

failed=()

echo "== format (scripts/check_format.sh)"
if ! "$repo_root/scripts/check_format.sh"; then
  failed+=("format")
fi
stage_took "format"

echo "== build ($BUILD_DIR: clang, its lock analysis as errors)"
# One compile of every unit does both: the lock analysis needs clang, which also
# compiles this tree faster than gcc. scripts/build.sh alone builds with the
# system's default compiler, as a user's build would.
clang="$(command -v clang-14 || command -v clang || true)"
clangxx="$(command -v clang++-14 || command -v clang++ || true)"
if [[ -z "$clang" || -z "$clangxx" ]]; then
  echo "no clang found (scripts/install_deps.sh installs clang)" >&2
  exit 1
fi
# CMake keeps the compiler a tree was first configured with: a build/ that
# scripts/build.sh configured with the system's compiler is configured afresh
# (ccache keeps its rebuild short).
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] &&
  ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$clangxx\$" "$BUILD_DIR/CMakeCache.txt"; then
  echo "$BUILD_DIR was configured with another compiler: configuring it afresh with $clangxx"
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
fi
CMAKE_ARGS="-DCMAKE_C_COMPILER=$clang -DCMAKE_CXX_COMPILER=$clangxx -DHVDD_THREAD_SAFETY=ON \
  ${CMAKE_ARGS:-}" "$repo_root/scripts/build.sh"
stage_took "build"

echo "== unit tests (ctest in $BUILD_DIR)"
# A hung test fails after 10 minutes instead of eating CI's whole budget.
if ! (cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600); then
  failed+=("unit tests")
fi
stage_took "unit tests"

echo "== integration tests (pytest tests/integration tests/python)"
if [[ -z "$(find "$repo_root/tests/integration" -name 'test_*.py' -o -name '*_test.py')" ]]; then
  echo "no integration tests yet: skipped"
else
  # The python3 first on PATH may be one without pytest (e.g. pyenv's); the
  # system one has it from python3-pytest.
  python=""
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import pytest" 2>/dev/null; then
      python="$candidate"
      break
    fi
  done
  if [[ -z "$python" ]]; then
    echo "no python3 with pytest found (install python3-pytest)" >&2
    failed+=("integration tests")
  # tests/python's workers import the horovodd package from the build tree.
  else
    # Two test files at a time (pytest-xdist, one file per worker, so a file's
    # fixtures such as its Slurm cluster are made once): the tests mostly wait on
    # real processes. PYTEST_JOBS=1 runs them one by one.
    parallel=()
    jobs="${PYTEST_JOBS:-2}"
    if [[ "$jobs" -gt 1 ]] && "$python" -c "import xdist" 2>/dev/null; then
      parallel=(-n "$jobs" --dist loadfile)
    fi
    if ! (cd "$repo_root" && PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
            "$python" -m pytest -q --durations=20 "${parallel[@]}" tests/integration tests/python); then
      failed+=("integration tests")
    fi
  fi
fi
stage_took "integration tests"

echo "== fuzz (scripts/fuzz.sh: the clang tree, ${FUZZ_SECONDS:-15}s per target)"
# Short on purpose (CI); tests/fuzz/README.md says how to run longer.
if ! FUZZ_SECONDS="${FUZZ_SECONDS:-15}" "$repo_root/scripts/fuzz.sh"; then
  failed+=("fuzz")
fi
stage_took "fuzz"

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "all tests passed"
