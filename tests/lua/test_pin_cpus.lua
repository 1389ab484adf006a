-- CPU pinning: tl.pin_cpus parses CPU lists and names a malformed one; a measurement child
-- times on the CPUs of TUNELUA_MEASURE_CPUS (a kernel that fails unless it runs on the CPU
-- named there), and a malformed TUNELUA_MEASURE_CPUS is a named error for that trial.
local ffi = require "ffi"
local tl = require "tunelua"
local measure = require "tunelua.autotvm.measure"
local util = require "tests.lua.lib.util"
local E = measure.MeasureErrorNo

ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); ]]

for _, bad in ipairs({ "", "x", "1-", "3-1", "1,,2", "2;3", "-1", "99999" }) do
  local ok, err = pcall(tl.pin_cpus, bad)
  assert(not ok and err:find("CPU list '" .. bad .. "'", 1, true), tostring(err))
end

-- the CPUs this process may use, from /proc
local allowed, cpus = util.allowed_cpus()
-- the last allowed CPU: a child binds to its first allowed CPU by default, so pinning shows
local target = cpus[#cpus]

local SIG = '{"name": "f", "args": [{"name": "A", "dtype": "float32", "shape": [4]}]}'
local SRC = string.format([[
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
int32_t f(void **a, int32_t n) { (void)a; (void)n; return sched_getcpu() == %d ? 0 : 7; }
]], target)
local task = { name = "pin_test", target = "llvm", args = {}, flop = 4 }
function task:lower() return { source = SRC, sig = SIG } end

local function run_one()
  local option = measure.measure_option({
    builder = measure.LocalBuilder({ n_parallel = 1, timeout = 20 }),
    runner = measure.LocalRunner({ number = 2, ["repeat"] = 2, cooldown_interval = 0 }),
  })
  local batch = measure.create_measure_batch(task, option)
  return batch({ measure.MeasureInput(task, { index = 0 }) })[1]
end

ffi.C.setenv("TUNELUA_MEASURE_CPUS", tostring(target), 1)
local r = run_one()
assert(r.error_no == E.NO_ERROR, tostring(r.error_msg))

ffi.C.setenv("TUNELUA_MEASURE_CPUS", "two,three", 1)
r = run_one()
assert(r.error_no == E.RUNTIME_DEVICE, measure.error_name(r.error_no))
assert(r.error_msg:find("TUNELUA_MEASURE_CPUS: CPU list 'two,three'", 1, true), r.error_msg)

-- this process itself, pinned to one CPU
tl.pin_cpus(tostring(target))
assert(util.allowed_cpus() == tostring(target))
print("test_pin_cpus: ok (measured on CPU " .. target .. ")")
