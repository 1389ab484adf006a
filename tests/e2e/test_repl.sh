#!/bin/bash
# The REPL end to end: fed through a pipe (no prompt, no line editing: what a script sees), and
# through a pseudo-terminal made by script(1) (util-linux), where readline edits the line, Tab
# completes names and the history is written to $HOME/.tunelua_history. The pieces (completion,
# printing, help) are tested from Lua in tests/lua/test_repl.lua.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"

# ---- through a pipe ----------------------------------------------------------------------------
out=$(printf 'help()\n' | "$TL" 2>&1); check help_overview 0 "help(x)" $? "$out"
check help_lists_modules 0 "autotvm" 0 "$out"
out=$(printf 'help(tl.lower)\n' | "$TL" 2>&1); check help_function 0 'tl.lower(s, {A, B, C}, {name = "f"})' $? "$out"
out=$(printf 'help("tl.autotvm.task.create")\n' | "$TL" 2>&1); check help_by_name 0 "-> Task" $? "$out"
out=$(printf 'tl.autotvm\n' | "$TL" 2>&1); check lazy_module_listed 0 "tune_tasks" $? "$out"
check lazy_submodules_listed 0 "task" 0 "$out"
out=$(printf 'tl.target\ntl.target.parse("llvm").family\n' | "$TL" 2>&1); check tl_target 0 "x86" $? "$out"
[[ "$out" != *"not found"* ]]; check tl_target_loads 0 "" $? "$out"

cat > "$tmp/explore.lua" <<'LUA'
t = tl.autotvm.task.create("dense_nopack.x86", {{"TENSOR", {1, 512}, "float32"}, {"TENSOR", {1000, 512}, "float32"}, nil, "float32"}, "llvm")
t
t.config_space
t:config(5)
help(t)
{t.name, n = #t.config_space}
LUA
out=$("$TL" < "$tmp/explore.lua" 2>&1); check print_task 0 "Task(func_name=dense_nopack.x86" $? "$out"
check print_space 0 "ConfigSpace (len=160" 0 "$out"
check print_config 0 "[('tile_y', [-1, 1]), ('tile_x', [-1, 10]), ('tile_k', [-1, 1])],None,5" 0 "$out"
check help_task 0 "instantiate(index)" 0 "$out"
check print_table 0 '{"dense_nopack.x86", n = 160}' 0 "$out"
[[ "$out" != *"tl>"* ]]; check no_prompt_on_a_pipe 0 "" $? "$out"

# ---- through a terminal --------------------------------------------------------------------------
# script(1) sends its own end-of-file only when its input ends, and a ^D typed while the REPL is
# busy evaluating (the terminal then in line mode) is not seen by readline; so the keys go
# through a FIFO, and ^D is typed once the REPL shows its prompt after the last command.
if ! command -v script >/dev/null 2>&1; then
  echo "FAIL: script(1) (util-linux) is needed to give the REPL a terminal"
  exit 1
fi
home="$tmp/home"
mkdir -p "$home"
mkfifo "$tmp/keys"
HOME="$home" timeout 300 script -qfec "$TL" /dev/null < "$tmp/keys" > "$tmp/tty.out" 2>&1 &
spid=$!
exec 3> "$tmp/keys"
# Tab completes a lazily loaded module's name, then a task's method
printf 'tl.autotvm.ta\t\nt = tl.autotvm.task.create("dense_nopack.x86", {{"TENSOR", {1, 8}, "float32"}, {"TENSOR", {4, 8}, "float32"}, nil, "float32"}, "llvm")\nt:wor\t()\nprint("last" .. "-line")\n' >&3
for _ in $(seq 1200); do     # the prompt after the last output (at most 120 s)
  if grep -q "last-line" <(tr -d '\r' < "$tmp/tty.out") && tr -d '\r' < "$tmp/tty.out" | tail -n 1 | grep -q 'tl> $'; then
    break
  fi
  sleep 0.1
done
printf '\004' >&3
exec 3>&-
wait "$spid"
check tty_exit 0 "" $? ""
out=$(tr -d '\r' < "$tmp/tty.out")
check tty_banner 0 "help() for help" 0 "$out"
check tty_completes_module 0 "tl> tl.autotvm.task" 0 "$out"
check tty_lazy_module_printed 0 "module tunelua.autotvm.task" 0 "$out"
check tty_completes_method 0 "t:workload()" 0 "$out"
check tty_method_ran 0 '[2] = {"TENSOR", {1, 8}, "float32"},' 0 "$out"
hist=$(cat "$home/.tunelua_history" 2>&1)
check tty_history 0 "t:workload()" 0 "$hist"

check_done test_repl
