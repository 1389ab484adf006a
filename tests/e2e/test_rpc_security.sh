#!/usr/bin/env bash
# The device farm against a careless or hostile peer, on loopback only (docs/rpc.md "Security"):
# port options out of range are refused; the default bind is 127.0.0.1 and a public one warns;
# planted links named like a server's work directory in a private TMPDIR are neither emptied nor
# adopted, and an upload never follows a link; the auth key is required by tracker and server
# (absent, wrong and unexpected keys refused with a clear message, the right one works); a PUT
# with a port that is not a number is refused, PUT entries leave with their connection, a frame
# of exactly 1 MiB is taken; silent connections hold up neither a server's next client nor the
# tracker (1100 of them); peers that never read do not stall the tracker; a client's -timeout
# cannot raise the server's --timeout.
#   bash tests/e2e/test_rpc_security.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init rpcsec 8 "${1:-}"
export TMPDIR=$W/tmp          # the servers' work directories: a private TMPDIR
mkdir -p "$TMPDIR"

# ---- port options: out of range is refused, naming the option --------------------------------
refused() {  # refused PATTERN ARGS...: the command exits non-zero at once, saying PATTERN
  local pat=$1; shift
  out=$(timeout 10 "$T" "$@" 2>&1) && fail "accepted: $*"
  [ $? = 124 ] && fail "not refused (it ran): $*"
  echo "$out" | grep -qF -- "$pat" || fail "$*: expected '$pat', got: $out"
}
refused "option --port expects an integer in 0..65535" rpc tracker --port 70000
refused "option --port expects an integer in 0..65535" rpc server --key k --port 70000
refused "option --port expects an integer in 0..65535" rpc tracker --port -1
refused "option --port-end expects an integer in 0..65536" rpc tracker --port 9190 --port-end 70000
refused "option --tracker expects a port in 1..65535" rpc server --key k --tracker 127.0.0.1:70000
refused "option --tracker expects a port in 1..65535" rpc server --key k --tracker 127.0.0.1:x
echo "ports: ok"

# ---- the default bind is loopback; a public bind warns ------------------------------------------
"$T" rpc tracker --port 0 > "$W/deftracker.out" 2>&1 &
DPID=$!; PIDS+=($DPID); disown $DPID
wait_for "$W/deftracker.out" "bind to" 5 || fail "tracker without --host did not start"
DPORT=$(bound_port "$W/deftracker.out")
[ -n "$DPORT" ] || fail "default bind is not 127.0.0.1: $(cat "$W/deftracker.out")"
HEX=$(printf '%04X' "$DPORT")
grep -q "^ *[0-9]*: 0100007F:$HEX 00000000:0000 0A" /proc/net/tcp || fail "not listening on 127.0.0.1:$DPORT"
grep -q "^ *[0-9]*: 00000000:$HEX " /proc/net/tcp && fail "listening on 0.0.0.0:$DPORT"
# --host 0.0.0.0 warns before it binds (here it cannot: the port is taken, nothing is exposed)
out=$(timeout 10 "$T" rpc tracker --host 0.0.0.0 --port "$DPORT" 2>&1) && fail "bound a taken port"
echo "$out" | grep -q "WARNING: listening on 0.0.0.0: every host that reaches this port" ||
  fail "no warning for a public bind: $out"
echo "$out" | grep -q "no auth key is set" || fail "the warning does not mention the key: $out"
echo "default bind: ok"

# ---- planted links in TMPDIR: neither emptied nor adopted; uploads do not follow links ----------
mkdir -p "$W/victim" "$W/victim2"
echo keep > "$W/victim/keep.txt"; echo keep > "$W/victim2/keep.txt"; echo keep > "$W/victim/target.txt"
ln -s "$W/victim" "$TMPDIR/tunelua-rpc-999999999"            # a "dead server's" directory: a link
mkdir "$TMPDIR/tunelua-rpc-999999998"; echo x > "$TMPDIR/tunelua-rpc-999999998/old.so"  # a real one
# the server's own pid, planted before it starts (bash's pid, kept by exec)
bash -c 'ln -s "$1" "$TMPDIR/tunelua-rpc-$$"; exec "$2" rpc server --key symk --host 127.0.0.1 --port 0' \
  _ "$W/victim2" "$T" > "$W/symserver.out" 2>&1 &
SYM=$!; PIDS+=($SYM); disown $SYM
wait_for "$W/symserver.out" "bind to" 5 || fail "server did not start"
SYMPORT=$(bound_port "$W/symserver.out")
[ -f "$W/victim/keep.txt" ] || fail "a planted link's target was emptied"
[ -f "$W/victim2/keep.txt" ] || fail "the link planted under the server's own pid was emptied"
[ -L "$TMPDIR/tunelua-rpc-999999999" ] || fail "the planted link was removed or replaced"
[ -e "$TMPDIR/tunelua-rpc-999999998" ] && fail "a stale work directory of ours was not removed"
cat > "$W/sym.lua" <<'EOF'
local rpc = require "tunelua.rpc"
local port, w = tonumber(arg[1]), arg[2]
local s = rpc.connect("127.0.0.1", port, {key = "symk", timeout = 8})
local wd = s:hello().workdir
print("workdir " .. wd)
-- the work directory: a fresh private directory, not the planted link
local p = io.popen("stat -c '%F %a %u' '" .. wd .. "'; readlink -f '" .. wd .. "'; id -u")
local st, real, uid = p:read("*l"), p:read("*l"), p:read("*l")
p:close()
assert(st == "directory 700 " .. uid, "work directory: " .. tostring(st))
assert(real:find(w .. "/tmp/", 1, true) == 1, "work directory resolves to " .. real)
-- a link planted in it under an upload's name is replaced, its target untouched
assert(os.execute("ln -s '" .. w .. "/victim/target.txt' '" .. wd .. "/evil.so'") == 0)
local f = io.open(w .. "/payload", "wb"); f:write("uploaded"); f:close()
s:upload(w .. "/payload", "evil.so")
f = io.open(w .. "/victim/target.txt"); local t = f:read("*a"); f:close()
assert(t == "keep\n", "an upload followed a link: " .. t)
f = io.open(wd .. "/evil.so"); t = f:read("*a"); f:close()
assert(t == "uploaded")
s:close()
print("links: ok")
EOF
"$T" "$W/sym.lua" "$SYMPORT" "$W" > "$W/sym.out" 2>&1 || fail "links: $(cat "$W/sym.out")"
[ -f "$W/victim2/keep.txt" ] && [ -f "$W/victim/keep.txt" ] || fail "a session emptied a planted link"
cat "$W/sym.out"

# ---- a silent peer does not hold up the server's next client ---------------------------------
exec 21<>/dev/tcp/127.0.0.1/$SYMPORT 22<>/dev/tcp/127.0.0.1/$SYMPORT 23<>/dev/tcp/127.0.0.1/$SYMPORT
"$T" -e "local rpc = require 'tunelua.rpc'
local s = rpc.connect('127.0.0.1', $SYMPORT, {key = 'symk', timeout = 8})
assert(s:hello().ok); s:close()" > "$W/silent.out" 2>&1 || fail "3 silent peers held up a client: $(cat "$W/silent.out")"
exec 21>&- 22>&- 23>&-
echo "silent peers at a server: ok"

# ---- a client's -timeout cannot raise the server's --timeout (2 s) ------------------------------
"$T" rpc server --key tk --host 127.0.0.1 --port 0 --timeout 2 > "$W/tserver.out" 2>&1 &
TSRV=$!; PIDS+=($TSRV); disown $TSRV
wait_for "$W/tserver.out" "bind to" 5 || fail "server with --timeout did not start"
exec 24<>/dev/tcp/127.0.0.1/$(bound_port "$W/tserver.out")
printf '\x71\xf2\x0f\x00\x16\x00\x00\x00client:tk -timeout=inf' >&24
timeout 30 cat <&24 > "$W/timeout.bin"
exec 24>&-
wait_for "$W/tserver.out" "session timed out after 2.0 s" 5 ||
  fail "the client's -timeout=inf outlived the server's --timeout 2"
echo "server timeout: ok"

# ---- the auth key --------------------------------------------------------------------------
printf 's3cret-key\n' > "$W/key"; chmod 600 "$W/key"
start_tracker atracker --port 0 --auth-key-file "$W/key"; APORT=$LPORT
"$T" rpc server --tracker 127.0.0.1:$APORT --key authk --host 127.0.0.1 --port 0 --auth-key-file "$W/key" \
  > "$W/aserver.out" 2>&1 &
ASRV=$!; PIDS+=($ASRV); disown $ASRV
wait_for "$W/aserver.out" "bind to" 5 || fail "keyed server did not start"
ASPORT=$(bound_port "$W/aserver.out")
# a server with the wrong key is refused by the tracker, and says so
"$T" rpc server --tracker 127.0.0.1:$APORT --key authk --host 127.0.0.1 --port 0 --auth-key wrong -v \
  > "$W/badserver.out" 2>&1 &
BSRV=$!; PIDS+=($BSRV); disown $BSRV
wait_for "$W/badserver.out" "refused the auth key" 10 || fail "a server with a wrong key: no clear message"
kill $BSRV
query() { "$T" rpc query --host 127.0.0.1 --port "$@"; }
out=$(query $APORT 2>&1) && fail "query without a key was answered"
echo "$out" | grep -q "requires an auth key" || fail "query without a key: $out"
out=$(query $APORT --auth-key s3cret-kez 2>&1) && fail "query with a wrong key was answered"
echo "$out" | grep -q "refused the auth key" || fail "query with a wrong key: $out"
out=$(query $DPORT --auth-key s3cret-key 2>&1) && fail "a keyed query of an unkeyed tracker was answered"
echo "$out" | grep -q "has no auth key, but one was given" || fail "keyed query, unkeyed tracker: $out"
for i in $(seq 50); do
  query $APORT --auth-key-file "$W/key" > "$W/aquery.txt" 2>&1
  awk '$1 == "authk" {print $2, $3}' "$W/aquery.txt" | grep -qx "1 1" && break
  sleep 0.2
done
awk '$1 == "authk" {print $2, $3}' "$W/aquery.txt" | grep -qx "1 1" || fail "keyed query: $(cat "$W/aquery.txt")"
TUNELUA_RPC_AUTH_KEY=s3cret-key query $APORT > /dev/null 2>&1 || fail "the key from the environment"
cat > "$W/auth.lua" <<'EOF'
local rpc = require "tunelua.rpc"
local tport, sport, uport = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
local function refused(pat, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected a refusal: " .. pat)
  assert(tostring(err):find(pat, 1, true), tostring(err))
end
-- straight at the keyed server: no key, a wrong key, then the right one
refused("requires an auth key", rpc.connect, "127.0.0.1", sport, {key = "x", timeout = 8})
refused("refused the auth key", rpc.connect, "127.0.0.1", sport, {key = "x", timeout = 8, auth_key = "nope"})
refused("refused the key", rpc.connect, "127.0.0.1", sport, {key = "x", timeout = 8, auth_key = "s3cret-key"})
-- a keyed client at an unkeyed server
refused("has no auth key", rpc.connect, "127.0.0.1", uport, {key = "symk", timeout = 8, auth_key = "s3cret-key"})
-- through the tracker, as RPCRunner does
refused("requires an auth key", rpc.request_remote, "authk", "127.0.0.1", tport, {timeout = 5})
local s = rpc.request_remote("authk", "127.0.0.1", tport, {timeout = 10, auth_key = "s3cret-key"})
assert(s:hello().ok)
s:close()
print("auth: ok")
EOF
"$T" "$W/auth.lua" $APORT $ASPORT $SYMPORT > "$W/auth.out" 2>&1 || fail "auth: $(cat "$W/auth.out")"
cat "$W/auth.out"

# ---- tracker messages: PUT ports, PUT owners, a frame of exactly 1 MiB ------------------------
start_tracker tracker --port 0; PORT=$LPORT
cat > "$W/frames.lua" <<'EOF'
local ffi = require "ffi"
local core = require "tunelua.core"
local rpc = require "tunelua.rpc"
local C, ctx = core.C, core.ctx
local port = tonumber(arg[1])
local exchange = require("tests.lua.lib.util").rpc_exchange(port)
local function frame(s)
  local n = #s
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, 0) .. s
end
local MAGIC = "\x71\xf2\x02\x00"
-- a port that is not a number: refused (the connection closes unanswered)
local got = exchange(MAGIC .. frame('[5, {"key": "server:pk", "addr": [null, 1]}]') ..
                     frame('[3, "pk", ["abc", "pk:1"], null]'))
assert(got == MAGIC .. frame("0"), "PUT with port 'abc' was answered: " .. got)
-- 30 PUTs from a connection that never registered, which then leaves: none stays free
local puts = {}
for i = 1, 30 do puts[i] = frame(string.format('[3, "ghost", [9, "ghost:%d"], null]', i)) end
got = exchange(MAGIC .. table.concat(puts))
assert(got == MAGIC .. string.rep(frame("0"), 30), "30 PUTs")
local q = rpc.summary("127.0.0.1", port, 5).queue_info.ghost
assert(q and q.free == 0, "entries of a closed connection are still free: " .. tostring(q and q.free))
-- a frame of exactly 1 MiB is taken, as documented
got = exchange(MAGIC .. frame("[1]" .. string.rep(" ", 1048576 - 3)), 3)
assert(got == MAGIC .. frame("0"), "a frame of exactly 1 MiB: " .. #got .. " bytes back")
print("frames: ok")
EOF
"$T" "$W/frames.lua" $PORT > "$W/frames.out" 2>&1 || fail "frames: $(cat "$W/frames.out")"
cat "$W/frames.out"

# ---- 1100 silent connections do not lock others out of the tracker -----------------------------
FD0=$(ls /proc/$LPID/fd | wc -l)
FLOOD=()
for i in $(seq 1100); do
  exec {fd}<>/dev/tcp/127.0.0.1/$PORT || break
  FLOOD+=($fd)
done
[ ${#FLOOD[@]} = 1100 ] || fail "opened only ${#FLOOD[@]} connections"
"$T" rpc query --host 127.0.0.1 --port $PORT > "$W/floodquery.txt" 2>&1 ||
  fail "1100 silent connections locked the tracker: $(cat "$W/floodquery.txt")"
for fd in "${FLOOD[@]}"; do exec {fd}>&-; done
echo "flood: ok"

# ---- peers that never read do not stall the tracker --------------------------------------------
# 4 connections wait for 60 devices each of long keys (a SUMMARY of about 70 KB); 5 more ask
# for 100 SUMMARYs each and never read the answers
cat > "$W/mkreq.lua" <<'EOF'
local function frame(s) local n = #s
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, 0) .. s end
local MAGIC = "\x71\xf2\x02\x00"
for c = 1, 4 do
  local t = {MAGIC}
  for i = 1, 60 do t[#t + 1] = frame(string.format("[4, \"wait-%d-%d-%s\", \"\", 1]", c, i, string.rep("x", 240))) end
  local f = assert(io.open(arg[1] .. "/req" .. c .. ".bin", "wb")); f:write(table.concat(t)); f:close()
end
local t = {MAGIC}
for i = 1, 100 do t[#t + 1] = frame("[6]") end
local f = assert(io.open(arg[1] .. "/sum.bin", "wb")); f:write(table.concat(t)); f:close()
EOF
"$T" "$W/mkreq.lua" "$W" || fail "writing the request files"
HOLD=()
for c in 1 2 3 4; do exec {fd}<>/dev/tcp/127.0.0.1/$PORT; cat "$W/req$c.bin" >&$fd; HOLD+=($fd); done
for c in 1 2 3 4 5; do exec {fd}<>/dev/tcp/127.0.0.1/$PORT; cat "$W/sum.bin" >&$fd; HOLD+=($fd); done
"$T" -e "local rpc = require 'tunelua.rpc'
local n = 0
for _ in pairs(rpc.summary('127.0.0.1', $PORT, 5).queue_info) do n = n + 1 end
assert(n >= 240, 'queues: ' .. n)" > "$W/stall.out" 2>&1 ||
  fail "peers that never read stalled the tracker: $(cat "$W/stall.out")"
for fd in "${HOLD[@]}"; do exec {fd}>&-; done
echo "non-reading peers: ok"

# ---- afterwards: everything alive, no descriptor left behind ------------------------------------
for i in $(seq 50); do [ "$(ls /proc/$LPID/fd | wc -l)" = "$FD0" ] && break; sleep 0.1; done
[ "$(ls /proc/$LPID/fd | wc -l)" = "$FD0" ] || fail "tracker fds: $FD0 before, $(ls /proc/$LPID/fd | wc -l) after"
kill -0 $LPID && kill -0 $SYM && kill -0 $ASRV || fail "a process died"
if grep -l "Sanitizer" "$W"/*.out; then fail "sanitizer reports"; fi
echo "test_rpc_security: ok"
