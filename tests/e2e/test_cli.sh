#!/bin/bash
# End-to-end checks of the tunelua command line: options, scripts, the REPL
# (fed through a pipe), and the one-line errors of misuse.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"

out=$("$TL" --version 2>&1); check version 0 "tunelua 0." $? "$out"
out=$("$TL" --help 2>&1); check help 0 "usage: tunelua" $? "$out"
out=$("$TL" -e 'print(1 + 2)' 2>&1); check eval 0 "3" $? "$out"
out=$("$TL" -e 'print(tl.version)' 2>&1); check eval_tl_loaded 0 "0." $? "$out"
out=$("$TL" -e 'error("bad thing")' 2>&1); check eval_error 1 "tunelua: (command line):1: bad thing" $? "$out"
# an error raised inside tunelua's own modules: the message without their file position (which
# says where it was raised, not what to change); TUNELUA_DEBUG=1 gives position and traceback
out=$("$TL" -e 'require("tunelua.stats").median(nil)' 2>&1); check internal_error 1 "tunelua: attempt to get length" $? "$out"
[[ "$out" != *"stats.lua:"* ]]; check internal_error_no_position 0 "" $? "$out"
out=$(TUNELUA_DEBUG=1 "$TL" -e 'require("tunelua.stats").median(nil)' 2>&1); check debug_error 1 "lua/tunelua/stats.lua:" $? "$out"
check debug_traceback 1 "stack traceback:" 1 "$out"
# a piped run: what the script printed comes before the error
out=$("$TL" -e 'print("first line"); error("late")' 2>&1 | head -1); check stdout_before_error 0 "first line" $? "$out"
out=$("$TL" "$tmp/missing.lua" 2>&1); check missing_script 1 "tunelua: cannot open script '$tmp/missing.lua': No such file or directory" $? "$out"
out=$("$TL" --bogus 2>&1); check unknown_option 1 "tunelua: unknown option '--bogus'" $? "$out"
out=$("$TL" -e 2>&1); check e_without_code 1 "'-e' needs an argument" $? "$out"

cat > "$tmp/args.lua" <<'LUA'
print(arg[0], #arg, arg[1], arg[2], select("#", ...))
LUA
out=$("$TL" "$tmp/args.lua" one two 2>&1); check script_args 0 "$tmp/args.lua	2	one	two	2" $? "$out"

cat > "$tmp/syntax.lua" <<'LUA'
local x = = 1
LUA
out=$("$TL" "$tmp/syntax.lua" 2>&1); check syntax_error 1 "syntax.lua:1:" $? "$out"

cat > "$tmp/exit.lua" <<'LUA'
os.exit(3)
LUA
"$TL" "$tmp/exit.lua" >/dev/null 2>&1; check exit_status 3 "" $? ""

# REPL through a pipe: expression values, statements, multi-line input, errors
out=$(printf 'x = 20\nx + 1\nfor i = 1, 2 do\nprint("line", i)\nend\nerror("oops")\n"after"\n' | "$TL" 2>&1)
check repl_expr 0 "21" $? "$out"
check repl_multiline 0 "line	2" 0 "$out"
check repl_error_continues 0 "after" 0 "$out"
out=$(printf 'tl.version\n' | "$TL" 2>&1); check repl_tl_loaded 0 "0." $? "$out"
out=$(printf 'print(y)\n' | "$TL" -i -e 'y = 42' 2>&1); check interactive_after_e 0 "42" $? "$out"

# modules are found without environment variables, from any directory
out=$(cd / && "$TL" -e 'print(require("tunelua").version)' 2>&1); check module_path 0 "0." $? "$out"

# a finalizer that never returns cannot keep a finished run from exiting: the close is given
# TUNELUA_CLOSE_LIMIT_S seconds, then the script's own status is the exit status
spin='KEEP = require("ffi").gc(require("ffi").new("char[1]"), function() while true do end end); print("done")'
out=$(TUNELUA_CLOSE_LIMIT_S=1 timeout 30 "$TL" -e "$spin" 2>&1)
check close_limit 0 "did not close within 1 s (its finalizers); exiting with status 0" $? "$out"
out=$(TUNELUA_CLOSE_LIMIT_S=1 timeout 30 "$TL" -e "$spin; error('stop')" 2>&1)
check close_limit_failed_run 1 "exiting with status 1" $? "$out"

check_done test_cli
