#!/bin/bash
# Finalizers that run Lua loops finish, at exit and in a collection mid-run. The LuaJIT of
# Debian 12 resumes the exit of a compiled `for k in pairs(t)` loop's end at the loop's own
# ITERN, which enters the same trace again; only a side trace, compiled once the exit is hot,
# breaks that cycle, and none is ever compiled inside a finalizer. So a finalizer reaching the
# end of such a loop whose end had not yet been reached in compiled code spun forever. Each
# script below first compiles such a loop and leaves its end unreached (the loop is left by an
# error), then has a finalizer run it (see host/main.c, measure.cleanup).
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"

# at exit: the host turns the JIT off and flushes every trace before lua_close, so the finalizers
# run interpreted. The limit is kept short here, so that a regression fails in seconds.
cat > "$tmp/close.lua" <<'LUA'
local ffi = require "ffi"
local n = 0
local function body() n = n + 1; if n == 300 then error("stop") end end
local function walk(t) for _ in pairs(t) do body() end end
local big = {}
for i = 1, 1000 do big["k" .. i] = true end
assert(not pcall(walk, big), "the walk is left by an error")
local marker = arg[1]
KEEP = ffi.gc(ffi.new("char[1]"), function() walk({ a = true }); os.remove(marker) end)
print("finished")
LUA
: > "$tmp/marker"
out=$(TUNELUA_CLOSE_LIMIT_S=20 timeout 120 "$TL" "$tmp/close.lua" "$tmp/marker" 2>&1)
check close_pairs_finalizer 0 "finished" $? "$out"
[[ "$out" != *"did not close"* ]]; check close_without_limit 0 "" $? "$out"
[ ! -e "$tmp/marker" ]; check close_finalizer_ran 0 "" $? "$out"

# mid-run: the guard of a runner's reference directory runs measure.cleanup when collected; its
# loops stay clear of pairs(), so a collection returns even with the loop compiled as above
cat > "$tmp/midrun.lua" <<'LUA'
local ffi = require "ffi"
local file = require "tunelua.file"
local measure = require "tunelua.autotvm.measure"
-- the lookup of tunelua.file in cleanup's loop over directories fails after many of them
local n = 0
package.loaded["tunelua.file"] = setmetatable({}, { __index = function()
  n = n + 1
  if n == 300 then error("stop") end
  return function() end
end })
local brs = {}
for i = 1, 1000 do brs[i] = { dir = arg[1] .. "/absent/" .. i } end
local ok = pcall(measure.cleanup, brs)
package.loaded["tunelua.file"] = file
assert(not ok and n == 300, "cleanup is left by an error after 300 directories")
local dir = arg[1] .. "/ref"
file.mkdirs(dir)
local guard = ffi.gc(ffi.new("char[1]"), function() measure.cleanup({ { dir = dir } }) end)
guard = nil
collectgarbage()
collectgarbage()
assert(not file.exists(dir), "the guard removed " .. dir)
print("collected")
LUA
out=$(timeout 120 "$TL" "$tmp/midrun.lua" "$tmp" 2>&1)
check midrun_cleanup_finalizer 0 "collected" $? "$out"

check_done test_finalizers
