#!/usr/bin/env bash
# Checks that every C++ file under src/ tests/ bench/ examples/ that git
# tracks (or would: new files not ignored) is formatted as .clang-format says; names each file that is not, with its
# changed line count, and exits 1. --fix rewrites those files in place.
#
#   scripts/check_format.sh          check (scripts/test.sh runs this)
#   scripts/check_format.sh --fix    reformat the files that differ
#   scripts/check_format.sh [--fix] PATH...   only these files, or those under these folders
#
# $CLANG_FORMAT overrides the tool (default clang-format-14, else clang-format):
# another major version formats differently.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

fix=0
if [[ "${1:-}" == "--fix" ]]; then
  fix=1
  shift
fi
[[ $# -gt 0 ]] || set -- src tests bench examples

tool="${CLANG_FORMAT:-}"
if [[ -z "$tool" ]]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" > /dev/null; then
      tool="$candidate"
      break
    fi
  done
fi
if [[ -z "$tool" ]]; then
  echo "check_format.sh: no clang-format found (apt-get install clang-format)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "$@" | grep -E '\.(cc|h|cpp|hpp|c|cu|cuh)$' || true)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "check_format.sh: no C++ files tracked under $*" >&2
  exit 2
fi

# One line per file that clang-format would change: "<lines changed> <file>"
# (a change that only adds lines counts as 1).
differing="$(printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "${JOBS:-2}" bash -c '
  tool=$1
  shift
  for file; do
    d=$(diff "$file" <("$tool" --style=file "$file")) && continue
    n=$(grep -c "^<" <<< "$d" || true)
    echo "$(( n > 0 ? n : 1 )) $file"
  done' bash "$tool" | sort -k2)"

if [[ -z "$differing" ]]; then
  echo "format: ${#files[@]} files as .clang-format says ($tool)"
  exit 0
fi
count=$(wc -l <<< "$differing")
lines=$(awk '{n += $1} END {print n}' <<< "$differing")
if [[ $fix -eq 1 ]]; then
  awk '{print $2}' <<< "$differing" | xargs "$tool" --style=file -i
  echo "format: rewrote $count of ${#files[@]} files ($lines lines differed)"
  exit 0
fi
echo "format: $count of ${#files[@]} files differ from .clang-format ($lines lines; $tool):"
awk '{printf "  %s (%d lines)\n", $2, $1}' <<< "$differing"
echo "run scripts/check_format.sh --fix to reformat them"
exit 1
