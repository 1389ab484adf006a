# Shared by the tests/e2e/test_rpc*.sh scripts (sourced, not a test of its own: only test_*.sh
# are registered). Only 127.0.0.1 and ports the OS hands out are used.
#   . "$(dirname "$0")/lib_rpc.sh"
#   rpc_init NAME TAIL [path/to/tunelua]   T (absolute), W (a fresh work folder, also
#                                           TUNELUA_MEASURE_DIR), PIDS killed at exit; fail
#                                           prints the last TAIL lines of every $W/*.out
#   start_tracker OUT [ARGS...]            a tracker (--host 127.0.0.1 ARGS) logging to $W/OUT.out;
#                                           sets LPID and LPORT once it is bound
#   start_server N                         a server of $KEY on tracker $PORT logging to
#                                           $W/serverN.out; sets SPID once it is bound
#   query_until "KEY TOTAL FREE PENDING" S  polls tracker $PORT (answer in $W/query.txt) until
#                                           KEY's row reads so; fails (status 1) after S seconds
#   wait_measuring SPID JOB TRIES WHAT     waits (0.02 s steps, TRIES at most) until a session of
#                                           server SPID runs a measurement (a child of its own);
#                                           fails when JOB ended first or after TRIES (WHAT names
#                                           the server in the message)
set -u

rpc_init() {
  T=${3:-${TUNELUA:-build/tunelua}}
  T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
  W=$(mktemp -d "/tmp/tunelua-e2e-$1.XXXXXX")
  FAIL_TAIL=$2
  PIDS=()
  trap rpc_cleanup EXIT
  export TUNELUA_MEASURE_DIR=$W
}

rpc_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$W"
}

fail() { echo "FAIL: $*"; for f in "$W"/*.out; do echo "== $f"; tail -"$FAIL_TAIL" "$f"; done; exit 1; }

wait_for() {  # wait_for FILE PATTERN SECONDS
  local i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    sleep 0.1; i=$((i + 1)); [ $i -gt $(($3 * 10)) ] && return 1
  done
  return 0
}

wait_measuring() {  # wait_measuring SPID JOB TRIES WHAT
  local server=$1 job=$2 tries=$3 what=$4 i=0 c
  while :; do
    for c in $(ps -o pid= --ppid "$server"); do [ -n "$(ps -o pid= --ppid "$c")" ] && return 0; done
    kill -0 "$job" 2>/dev/null || fail "the job ended before $what measured anything"
    sleep 0.02; i=$((i + 1)); [ $i -gt "$tries" ] && fail "$what never measured"
  done
}

bound_port() {  # bound_port FILE...: the ports of the "bind to 127.0.0.1:PORT" lines
  sed -n 's/^bind to 127.0.0.1:\([0-9]*\)$/\1/p' "$@"
}

start_tracker() {  # start_tracker OUT [ARGS...]
  local out=$1; shift
  "$T" rpc tracker --host 127.0.0.1 "$@" > "$W/$out.out" 2>&1 &
  LPID=$!; PIDS+=($LPID); disown $LPID
  wait_for "$W/$out.out" "bind to" 5 || fail "$out did not start ($*)"
  LPORT=$(bound_port "$W/$out.out")
  [ -n "$LPORT" ] || fail "no port in: $(cat "$W/$out.out")"
}

start_server() {  # start_server N
  "$T" rpc server --tracker 127.0.0.1:$PORT --key $KEY --host 127.0.0.1 --port 0 > "$W/server$1.out" 2>&1 &
  SPID=$!
  disown $SPID
  PIDS+=($SPID)
  wait_for "$W/server$1.out" "bind to" 5 || fail "server $1 did not start"
}

query_until() {  # query_until "KEY TOTAL FREE PENDING" SECONDS
  local i=0
  while true; do
    "$T" rpc query --host 127.0.0.1 --port $PORT > "$W/query.txt" 2>&1
    if awk -v k=$KEY '$1 == k {print $1, $2, $3, $4}' "$W/query.txt" | grep -qx "$1"; then return 0; fi
    sleep 0.2; i=$((i + 1)); [ $i -gt $(($2 * 5)) ] && return 1
  done
}
