#!/bin/bash
# Nothing lost, nothing left: a tuning log that cannot be written stops the run with the file
# and the errno named (ulimit -f: tunelua ignores SIGXFSZ, so writes fail with EFBIG); a SIGKILL while the
# flow rewrites its .trials leaves the old or the new file whole; a SIGKILLed tuner leaves no
# compiler running and its build directories go with the next run; paths never reach a shell
# (an apostrophe in TMPDIR, shell text in TUNELUA_MEASURE_DIR); the flow stops with a message
# when no task was extracted.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
src=$(cd "$(dirname "$0")/../.." && pwd)

# a tiny host-CPU task, tuned with tune_tasks: tune.lua LOG N_TRIAL
cat > "$tmp/tune.lua" <<'EOF'
local autotvm = require "tunelua.autotvm"
local task = autotvm.task.create("dense_nopack.x86",
  { { "TENSOR", { 1, 32 }, "float32" }, { "TENSOR", { 16, 32 }, "float32" }, "None", "float32" }, "llvm")
local mo = autotvm.measure_option({
  builder = autotvm.LocalBuilder({ n_parallel = 1, timeout = 600 }),
  runner = autotvm.LocalRunner({ number = 1, repeats = 1, cooldown_interval = 0 }) })
io.stdout:write("started\n") io.stdout:flush()
local sum = autotvm.tune_tasks({ task }, mo, { tuner = "random", n_trial = tonumber(arg[2]),
                                               log_filename = arg[1], quiet = true, seed = 3 })
print(string.format("trials %d best_flops %s", sum[1].trials, sum[1].best_flops > 0 and "ok" or "0"))
EOF

# ---- a full file: the write error ends the run, naming the file and the errno -------------
# the tmp log is 200 bytes short of the 1 MiB limit: the first batch of records crosses it
log="$tmp/full.log"
head -c $((1048576 - 200)) /dev/zero | tr '\0' 'x' | sed '1s/^/#/' > "$log.tmp"
echo >> "$log.tmp"
out=$( (ulimit -f 1024; "$TL" "$tmp/tune.lua" "$log" 4) 2>&1); rc=$?
check "full file: names the file and the errno" 1 "cannot write '$log.tmp': File too large (EFBIG)" "$rc" "$out"
check "full file: no final log written" 0 "no final log" 0 "$( [ -e "$log" ] && echo "$log exists" || echo "no final log")"
check "full file: the tmp log is kept" 0 "kept" 0 "$( [ -s "$log.tmp" ] && echo kept || echo "$log.tmp is gone")"

# ---- SIGKILL while the flow rewrites LOG.trials: the old or the new file, whole -----------
trials="$tmp/k.log.trials"
line='{"input": ["llvm", "dense_nopack.x86", [["TENSOR", [1, 32], "float32"], ["TENSOR", [16, 32], "float32"], null, "float32"], {}], "config": {"index": IDX, "code_hash": null, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 1]], ["tile_k", "sp", [-1, 1]]]}, "result": [[1e-05], 0, 0.5, 1700000000.0], "version": 0.2, "tvm_version": "0.8.dev0"}'
seq 1 60000 | while read -r i; do echo "${line/IDX/$i}"; done > "$trials.orig"
seq 60001 60010 | while read -r i; do echo "${line/IDX/$i}"; done > "$tmp/k.log.tmp.orig"
n_old=$(wc -l < "$trials.orig")
cat > "$tmp/keep.lua" <<'EOF'
require("tunelua.flow").keep_trials({ run = function() return {} end }, arg[1])
EOF
size=$(stat -c %s "$trials.orig")
for attempt in 1 2 3; do
  cp "$trials.orig" "$trials"
  cp "$tmp/k.log.tmp.orig" "$tmp/k.log.tmp"
  "$TL" "$tmp/keep.lua" "$tmp/k.log" & pid=$!
  # kill once the rewrite has begun: the file changed, or its replacement appeared
  for _ in $(seq 1 2000); do
    if [ "$(stat -c %s "$trials" 2>/dev/null)" != "$size" ] || compgen -G "$trials.part-*" > /dev/null; then
      break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.002
  done
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  n=$(wc -l < "$trials")
  last=$(tail -c 2 "$trials" | head -c 1)
  ok=no
  if [ "$n" = "$n_old" ] || [ "$n" = $((n_old + 10)) ]; then [ "$last" = "}" ] && ok=yes; fi
  check "SIGKILL during the rewrite ($attempt): $n lines, old $n_old or new $((n_old + 10))" 0 "yes" 0 "$ok"
  rm -f "$trials".part-*
done

# ---- a SIGKILLed tuner leaves no compiler behind, and no build directory --------------------
cat > "$tmp/slowcc" <<EOF
#!/bin/sh
# a compiler that never finishes, with a child of its own (as cc has cc1)
sleep 300 &
echo \$! >> "$tmp/cc.pids"
echo \$\$ >> "$tmp/cc.pids"
wait
EOF
chmod +x "$tmp/slowcc"
mkdir -p "$tmp/m"
TUNELUA_MEASURE_DIR="$tmp/m" TUNELUA_CC="$tmp/slowcc" "$TL" "$tmp/tune.lua" "$tmp/o.log" 2 > /dev/null 2>&1 &
tuner=$!
for _ in $(seq 1 600); do
  [ "$(cat "$tmp/cc.pids" 2>/dev/null | wc -l)" = 2 ] && break
  sleep 0.05
done
check "mid-compile: the compiler started" 0 "2" 0 "$(wc -l < "$tmp/cc.pids" 2>/dev/null)"
{ kill -9 $tuner; wait $tuner; } 2>/dev/null
left=""
for _ in $(seq 1 100); do
  left=""
  for p in $(cat "$tmp/cc.pids"); do kill -0 "$p" 2>/dev/null && left="$left $p"; done
  [ -z "$left" ] && break
  sleep 0.05
done
for p in $left; do kill -9 "$p" 2>/dev/null; done
check "mid-compile: no child survives the tuner" 0 "none left" 0 "${left:-none left}"
out=$(TUNELUA_MEASURE_DIR="$tmp/m" "$TL" "$tmp/tune.lua" "$tmp/o2.log" 1 2>&1); rc=$?
check "the next run tunes" 0 "trials 1 best_flops ok" "$rc" "$out"
check "the killed run's build directory is gone" 0 "empty" 0 "$(ls -A "$tmp/m")${left:+}$( [ -z "$(ls -A "$tmp/m")" ] && echo empty)"

# ---- no shell for paths ---------------------------------------------------------------------
mkdir -p "$tmp/it's"
out=$(TMPDIR="$tmp/it's" "$TL" "$tmp/tune.lua" "$tmp/a.log" 2 2>&1); rc=$?
check "an apostrophe in TMPDIR" 0 "trials 2 best_flops ok" "$rc" "$out"
out=$(TUNELUA_MEASURE_DIR="$tmp/m2'; touch '$tmp/pwned'; : '" "$TL" "$tmp/tune.lua" "$tmp/b.log" 1 2>&1); rc=$?
check "shell text in TUNELUA_MEASURE_DIR is a name" 0 "trials 1 best_flops ok" "$rc" "$out"
check "shell text in TUNELUA_MEASURE_DIR runs nothing" 0 "nothing ran" 0 "$( [ -e "$tmp/pwned" ] && echo ran || echo "nothing ran")"

# ---- the flow stops with a message when no task was extracted -------------------------------
out=$(cd "$tmp" && "$TL" "$src/scripts/tune_relay_x86.lua" --network resnet-18 \
      --ops nn.no_such_op --log "$tmp/f.log" 2>&1); rc=$?
check "no task extracted" 1 "no tuning task extracted from resnet-18 for the ops nn.no_such_op" "$rc" "$out"

check_done test_durable
