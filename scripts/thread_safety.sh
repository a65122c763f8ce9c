#!/usr/bin/env bash
# Clang's lock analysis over every translation unit of src/: each one is
# parsed with clang -fsyntax-only -Wthread-safety -Werror=thread-safety, with
# the flags the clang tree recorded for it (scripts/clang_build.sh, the tree
# scripts/fuzz.sh builds too; its compile_commands.json), through ccache when
# it is installed, so a unit whose sources did not change is not parsed
# again. The tree is configured and its generated headers (the .pb.h files)
# are built first. Fails if any unit has a thread-safety warning or does not
# compile with clang; other warnings are not asked for.
#
#   scripts/thread_safety.sh                    every unit of src/, $JOBS (2) at a time
#   scripts/thread_safety.sh src/daemon a.cc    only these units, or those under these folders
#
#   CLANG_BUILD_DIR  the clang tree (default: <repo>/build-clang)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CLANG_BUILD_DIR:-$repo_root/build-clang}"
jobs="${JOBS:-2}"

# Configures the tree (compile_commands.json) and generates the protobuf and
# gRPC headers the units include.
prepare_log="$(mktemp)"
trap 'rm -f "$prepare_log"' EXIT
if ! CLANG_BUILD_DIR="$build_dir" "$repo_root/scripts/clang_build.sh" \
    hvdd_proto_messages hvdd_proto_grpc > "$prepare_log" 2>&1; then
  cat "$prepare_log" >&2
  echo "thread_safety.sh: could not prepare the clang tree $build_dir" >&2
  exit 1
fi

[[ $# -gt 0 ]] || set -- src

launcher=()
if command -v ccache > /dev/null; then
  launcher=(ccache)
  # As scripts/build.sh sets them (the same cache entries from any checkout).
  if [[ -z "${CCACHE_BASEDIR:-}" && -z "$(ccache --get-config base_dir 2> /dev/null)" ]]; then
    export CCACHE_BASEDIR="$repo_root"
  fi
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi

python3 - "$build_dir/compile_commands.json" "$repo_root" "$jobs" "${#launcher[@]}" \
  "${launcher[@]}" "$@" <<'PY'
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import time

compile_commands, repo_root, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
launcher_count = int(sys.argv[4])
launcher = sys.argv[5:5 + launcher_count]
paths = sys.argv[5 + launcher_count:]
wanted = [os.path.realpath(os.path.join(repo_root, p)) for p in paths]


def is_wanted(path):
    return any(path == w or path.startswith(w.rstrip("/") + "/") for w in wanted)


# The tree's own clang command, less what builds an object (output,
# dependency files) and its warning flags: only the lock analysis is asked for.
DROPPED_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
DROPPED = {"-c", "-MD", "-MMD", "-Werror"}


def analysis_command(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    kept = [args[0]]
    i = 1
    while i < len(args):
        arg = args[i]
        if arg in DROPPED_WITH_VALUE:
            i += 2
            continue
        is_warning_flag = arg.startswith("-W") and not arg.startswith(("-Wl,", "-Wp,", "-Wa,"))
        if arg not in DROPPED and not is_warning_flag and arg != entry["file"]:
            kept.append(arg)
        i += 1
    return [*launcher, *kept, "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
            entry["file"]]


with open(compile_commands) as f:
    entries = json.load(f)
units = {}
for entry in entries:
    path = os.path.realpath(os.path.join(entry.get("directory", ""), entry["file"]))
    if is_wanted(path) and path.endswith((".cc", ".cpp")):
        units[path] = (entry.get("directory") or ".", analysis_command(entry))
if not units:
    sys.exit(f"thread_safety.sh: no translation units of {' '.join(paths)} in {compile_commands}")


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
compiler = os.path.basename(next(iter(units.values()))[1][len(launcher)])
print(f"thread-safety: {len(units)} units, {len(failed)} failed, "
      f"{time.monotonic() - start:.0f}s with {compiler}{' through ccache' if launcher else ''}, "
      f"{jobs} at a time")
for path in failed:
    print(f"  FAILED {path}")
sys.exit(1 if failed else 0)
PY
