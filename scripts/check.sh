#!/usr/bin/env bash
# What a contributor runs before committing, on what the change touches (against BASE, default
# HEAD: the uncommitted change):
#   1. clang-format (.clang-format) on the changed lines of C++ and CUDA files;
#   2. clang-tidy (.clang-tidy) on the changed .cpp files, with BUILD_DIR's compile_commands.json
#      (default build; `./gat.sh build` makes it);
#   3. `duplicates --change`, where that tool is installed: what the change wrote twice.
#
#   scripts/check.sh [--fix] [BASE]     --fix: apply the formatting instead of showing it
#
# Exits non-zero when the formatting or clang-tidy has something to say.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
if [ "${1:-}" = --fix ]; then fix=1; shift; fi
base=${1:-HEAD}
build=${BUILD_DIR:-build}
status=0

for tool in clang-format git-clang-format clang-tidy; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool is missing (apt-get install clang-format clang-tidy)" >&2; exit 2; }
done
mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- '*.h' '*.cpp' '*.cu' '*.cuh')
mapfile -t untracked < <(git ls-files --others --exclude-standard -- '*.h' '*.cpp' '*.cu' '*.cuh')
changed+=("${untracked[@]}")

echo "== clang-format (changed lines)"
if ((${#changed[@]})); then
  if ((fix)); then
    git clang-format --quiet "$base" -- "${changed[@]}" || true
  else
    out=$(git clang-format --diff "$base" -- "${changed[@]}" || true)
    if [ -n "$out" ] && ! grep -q "^no modified files\|^clang-format did not modify" <<<"$out"; then
      echo "$out"
      echo "check.sh: the changed lines are not formatted: scripts/check.sh --fix $base"
      status=1
    fi
  fi
fi

echo "== clang-tidy (changed .cpp files)"
mapfile -t sources < <(printf '%s\n' "${changed[@]}" | grep '\.cpp$' || true)
if ((${#sources[@]})); then
  [ -f "$build/compile_commands.json" ] || { echo "check.sh: no $build/compile_commands.json: ./gat.sh build first" >&2; exit 2; }
  if clang-tidy -p "$build" --quiet "${sources[@]}" 2>/dev/null | grep -B2 -A6 "warning:\|error:"; then
    status=1
  fi
fi

echo "== duplicates --change"
if command -v duplicates >/dev/null; then
  duplicates --change --base "$base"
else
  echo "(duplicates is not installed here: skipped)"
fi
exit $status
