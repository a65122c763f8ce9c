#!/usr/bin/env bash
# Clang's lock analysis over every translation unit of src/: each one is
# compiled with clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety,
# using the flags the main build recorded in $BUILD_DIR/compile_commands.json
# (scripts/build.sh configures with CMAKE_EXPORT_COMPILE_COMMANDS=ON), so no
# second build tree is made. Run it after a build: generated headers (the
# .pb.h files) come from the main build. Fails if any unit has a
# thread-safety warning or does not compile with clang.
#
#   scripts/thread_safety.sh                    every unit of src/, $JOBS (2) at a time
#   scripts/thread_safety.sh src/daemon a.cc    only these units, or those under these folders
#
# $CLANGXX overrides the compiler (default clang++-14, else clang++).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$repo_root/build}"
compile_commands="$build_dir/compile_commands.json"
jobs="${JOBS:-2}"

clangxx="${CLANGXX:-}"
if [[ -z "$clangxx" ]]; then
  for candidate in clang++-14 clang++; do
    if command -v "$candidate" >/dev/null; then
      clangxx="$candidate"
      break
    fi
  done
fi
if [[ -z "$clangxx" ]]; then
  echo "thread_safety.sh: no clang++ found (install clang-14)" >&2
  exit 1
fi
if [[ ! -f "$compile_commands" ]]; then
  echo "thread_safety.sh: no $compile_commands; run scripts/build.sh first" >&2
  exit 1
fi

[[ $# -gt 0 ]] || set -- src

# The recorded commands are gcc's. Only what decides how a unit parses
# (include paths, macros, language standard, -pthread, a few -f options)
# goes to clang; optimisation, debug info, output and every -W flag are
# dropped, so a gcc-only warning flag or option never reaches clang and the
# only warnings that fail the check are the thread-safety ones.
exec python3 - "$compile_commands" "$repo_root" "$clangxx" "$jobs" "$@" <<'PY'
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import time

compile_commands, repo_root, clangxx, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
wanted = [os.path.realpath(os.path.join(repo_root, p)) for p in sys.argv[5:]]


def is_wanted(path):
    return any(path == w or path.startswith(w.rstrip("/") + "/") for w in wanted)


# Options that take their value as the next argument and are kept.
KEPT_WITH_VALUE = {"-I", "-isystem", "-iquote", "-idirafter", "-D", "-U", "-include"}
# Options that take their value as the next argument and are dropped.
DROPPED_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ", "-x"}
# -f options clang shares with gcc and that change how code parses.
KEPT_F = ("-fPIC", "-fPIE", "-fpic", "-fpie", "-fno-exceptions", "-fexceptions",
          "-fno-rtti", "-frtti", "-fvisibility=", "-fopenmp", "-fsized-deallocation",
          "-fchar8_t", "-fno-char8_t", "-fsigned-char", "-funsigned-char")


def clang_arguments(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    kept = []
    i = 1  # args[0] is gcc (or ccache; then args[1] is gcc)
    if os.path.basename(args[0]).startswith("ccache"):
        i = 2
    while i < len(args):
        arg = args[i]
        if arg in KEPT_WITH_VALUE and i + 1 < len(args):
            kept += [arg, args[i + 1]]
            i += 2
            continue
        if arg in DROPPED_WITH_VALUE:
            i += 2
            continue
        if (any(arg.startswith(flag) and len(arg) > len(flag) for flag in KEPT_WITH_VALUE)
                or arg.startswith("-std=") or arg == "-pthread"
                or any(arg == flag or (flag.endswith("=") and arg.startswith(flag))
                       for flag in KEPT_F)):
            kept.append(arg)
        i += 1
    return [clangxx, *kept, "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
            "-Wno-unknown-warning-option", entry["file"]]


with open(compile_commands) as f:
    entries = json.load(f)
units = {}
for entry in entries:
    path = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
    if is_wanted(path) and path.endswith((".cc", ".cpp")):
        units[path] = (entry.get("directory") or ".", clang_arguments(entry))
if not units:
    sys.exit(f"thread_safety.sh: no translation units of {' '.join(sys.argv[5:])} in {compile_commands}")


def check(path):
    directory, command = units[path]
    result = subprocess.run(command, cwd=directory, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return path, result.returncode, result.stdout


start = time.monotonic()
failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for path, returncode, output in pool.map(check, sorted(units)):
        if returncode != 0:
            failed.append(os.path.relpath(path))
            sys.stdout.write(output)
        elif "warning:" in output:
            sys.stdout.write(output)  # other clang warnings: shown, not fatal
print(f"thread-safety: {len(units)} units, {len(failed)} failed, "
      f"{time.monotonic() - start:.0f}s with {clangxx}, {jobs} at a time")
for path in failed:
    print(f"  FAILED {path}")
sys.exit(1 if failed else 0)
PY
