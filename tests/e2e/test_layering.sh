#!/bin/bash
# The dependency direction of docs/architecture.md, checked on every `#include "..."` of
# core/, targets/, rpc/, host/ and device/: a file may include a header of its own layer or of a
# lower one, never of a higher one or of another layer of the same rank. Paths resolve
# against the including file's directory, then against core/ (the include directory).
# A directory missing from the table below fails too: a new area says where it sits.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

# layer rank: lower ranks are included by higher ones
declare -A rank=(
  [core]=0            # the public header, core/tunelua*.h
  [core/base]=1
  [core/ir]=2 [core/runtime]=2
  [core/te]=3 [core/codegen]=3
  [core/topi]=4 [core/build]=4
  [core/autotvm]=5 [core/tuner]=5 [core/measure]=5 [core/graph]=5 [core/ansor]=5
  [targets]=6
  [rpc]=7
  [host]=8
  [device]=8          # the device programs: base and the runtime's time evaluator only
)

layer_of() {   # repository-relative path -> layer name
  case "$1" in
    core/*/*) local r="${1#core/}"; echo "core/${r%%/*}" ;;
    core/*) echo core ;;
    targets/*) echo targets ;;
    rpc/*) echo rpc ;;
    host/*) echo host ;;
    device/*) echo device ;;
    *) echo "" ;;
  esac
}

fail=0
nchecked=0
while IFS= read -r f; do
  from="$(layer_of "$f")"
  if [ -z "${rank[$from]+x}" ]; then
    echo "FAIL: $f: directory '$from' has no layer in tests/e2e/test_layering.sh" >&2
    fail=1
    continue
  fi
  dir="$(dirname "$f")"
  while IFS= read -r line; do
    inc="$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/' <<< "$line")"
    target=""
    for cand in "$dir/$inc" "core/$inc"; do
      if [ -f "$cand" ]; then target="$(realpath -m --relative-to="$root" "$cand")"; break; fi
    done
    [ -n "$target" ] || continue             # generated or system header
    to="$(layer_of "$target")"
    [ -n "$to" ] || continue
    nchecked=$((nchecked + 1))
    [ "$to" = "$from" ] && continue
    if [ -z "${rank[$to]+x}" ]; then
      echo "FAIL: $f includes \"$inc\" ($target): directory '$to' has no layer" >&2
      fail=1
    elif [ "${rank[$to]}" -ge "${rank[$from]}" ]; then
      echo "FAIL: $f includes \"$inc\" ($target): $from (rank ${rank[$from]}) may not include" \
           "$to (rank ${rank[$to]})" >&2
      fail=1
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
done < <(find core targets rpc host device -type f \( -name '*.c' -o -name '*.h' \) | sort)

if [ "$fail" != 0 ]; then
  echo "FAIL: includes against the layering (docs/architecture.md)" >&2
  exit 1
fi
echo "layering: $nchecked includes between project headers, none upward"
