# Shared by the e2e scripts that kill a tuning run midway (sourced, not a test of its own: only
# test_*.sh are registered).
#   . tests/e2e/lib_kill.sh
#   kill_after_lines LOG MIN TENTHS OUT CMD...
# runs CMD in the background (stdout and stderr to OUT), waits until LOG holds MIN lines (at
# most TENTHS tenths of a second), then kills it with SIGKILL; a run that ended before it was
# killed fails the script (its output shown).
kill_after_lines() {
  local log=$1 min=$2 tenths=$3 out=$4
  shift 4
  "$@" > "$out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 "$tenths"); do
    [ -f "$log" ] && [ "$(wc -l < "$log")" -ge "$min" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || { echo "FAIL: the first run ended before it was killed"; cat "$out"; exit 1; }
  wait "$pid" 2>/dev/null || true
}
