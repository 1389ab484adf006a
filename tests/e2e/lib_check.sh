# Shared by the command-line tests/e2e/test_*.sh scripts (sourced, not a test of its own: only
# test_*.sh are registered): TL (the tunelua binary, absolute), tmp (a work folder removed at
# exit), and check, which counts passes and fails.
#   . "$(dirname "$0")/lib_check.sh" [path/to/tunelua]
#   ... check NAME EXPECTED_STATUS EXPECTED_SUBSTRING ACTUAL_STATUS ACTUAL_OUTPUT ...
#   check_done NAME   (prints the counts; its status is the script's)
set -u
TL=$(realpath "${1:-build/tunelua}")
fails=0
passes=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {   # check NAME EXPECTED_STATUS EXPECTED_SUBSTRING ACTUAL_STATUS ACTUAL_OUTPUT
  local name=$1 want_rc=$2 want=$3 rc=$4 out=$5
  if [ "$rc" != "$want_rc" ] || [[ "$out" != *"$want"* ]]; then
    echo "FAIL $name: status $rc (want $want_rc), output:"
    echo "$out" | head -20
    echo "  expected to contain: $want"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

check_done() {  # check_done NAME
  echo "$1: $passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
