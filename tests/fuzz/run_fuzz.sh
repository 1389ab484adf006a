#!/usr/bin/env bash
# Run a libFuzzer target (tests/fuzz/fuzz_*.c, built by CMake where clang has libFuzzer) for a
# bounded time on a copy of its seed corpus, in a fresh temporary directory removed afterwards.
# A crash, leak or hang fails with the input in hex.
#   bash tests/fuzz/run_fuzz.sh FUZZER SEED_DIR MAX_LEN [SECONDS]
set -u
F=$1; S=$2; L=$3; SECS=${4:-15}
D=$(mktemp -d "${TMPDIR:-/tmp}/tunelua-fuzz.XXXXXX")
trap 'rm -rf "$D"' EXIT
mkdir "$D/corpus"
"$F" -max_total_time="$SECS" -max_len="$L" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$D/" "$D/corpus" "$S" > "$D/log" 2>&1
rc=$?
grep -v "^#[0-9]" "$D/log" | tail -20
if [ $rc != 0 ]; then
  for a in "$D"/crash-* "$D"/leak-* "$D"/timeout-* "$D"/oom-*; do
    [ -f "$a" ] && { echo "input $(basename "$a"):"; od -An -tx1 "$a" | head -64; }
  done
  echo "FAIL: $F exited with $rc"
  exit 1
fi
grep -q "^Done [0-9]* runs" "$D/log" || { echo "FAIL: $F did not run"; exit 1; }
echo "fuzz: ok ($(grep "^Done" "$D/log"))"
