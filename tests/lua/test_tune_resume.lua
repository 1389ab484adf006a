-- test_tune_resume.lua: SIGKILL a tuning process mid-run; its log loads, and tune_tasks with
-- the same log resumes: the configs already measured are not measured again.
local host = require "tunelua.host"
local autotvm = require "tunelua.autotvm"
local record = require "tunelua.autotvm.record"

local dir = os.getenv("TMPDIR") or "/tmp"
local base = string.format("%s/tl_tune_resume_%d_%d", dir, os.time(), math.random(1e9))
local log = base .. ".log"
local script = base .. "_child.lua"

local ARGS = [[{ { "TENSOR", { 1, 32 }, "float32" }, { "TENSOR", { 16, 32 }, "float32" }, "None", "float32" }]]
local f = assert(io.open(script, "w"))
f:write(string.format([[
local autotvm = require "tunelua.autotvm"
local task = autotvm.task.create("dense_nopack.x86", %s, "llvm")
local mo = autotvm.measure_option({
  builder = autotvm.LocalBuilder({ n_parallel = 1 }),
  runner = autotvm.LocalRunner({ number = 1, repeats = 1, cooldown_interval = 0 }) })
io.stdout:write("started\n") io.stdout:flush()
autotvm.tune_tasks({ task }, mo, { tuner = "random", n_trial = 1000, log_filename = %q, quiet = true, seed = 7 })
]], ARGS, log))
f:close()

-- the child tunes far more than it gets time for; SIGKILL after a few trials
local tmp = log .. ".tmp"
local rc = os.execute(string.format("timeout -s KILL 5 %s %s >/dev/null 2>&1", host.exe, script))
assert(rc ~= 0 and rc ~= true, "the child was expected to be killed")
local lines = 0
for _ in io.lines(tmp) do lines = lines + 1 end
assert(lines >= 1, "the killed run left no records")
local recs = record.load_from_file(tmp)   -- every line parses (a torn line would warn)
assert(#recs == lines, #recs .. " of " .. lines .. " lines load")
local done = {}
for _, r in ipairs(recs) do done[r.inp.config.index] = true end

-- resume: 3 more trials than were measured, none of them repeats
local task = autotvm.task.create("dense_nopack.x86", loadstring("return " .. ARGS)(), "llvm")
local mo = autotvm.measure_option({
  builder = autotvm.LocalBuilder({ n_parallel = 1 }),
  runner = autotvm.LocalRunner({ number = 1, repeats = 1, cooldown_interval = 0 }) })
local new = {}
local run = mo.runner.run
mo.runner.run = function(self, inputs, brs)
  for _, inp in ipairs(inputs) do new[#new + 1] = inp.config.index end
  return run(self, inputs, brs)
end
local ndone = 0
for _ in pairs(done) do ndone = ndone + 1 end
local sum = autotvm.tune_tasks({ task }, mo, { tuner = "random", n_trial = ndone + 3,
                                               log_filename = log, quiet = true, seed = 8 })
assert(sum[1].resumed == ndone, sum[1].resumed .. " vs " .. ndone)
assert(sum[1].trials == 3 and #new == 3, sum[1].trials)
for _, i in ipairs(new) do assert(not done[i], "config " .. i .. " measured twice") end
assert(#record.load_from_file(log) == 1)
assert(io.open(tmp) == nil)
os.remove(log)
os.remove(script)
print("test_tune_resume: ok (" .. ndone .. " trials before the kill)")
