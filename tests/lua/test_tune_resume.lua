-- test_tune_resume.lua: SIGKILL a tuning process mid-run; its log loads, and tune_tasks with
-- the same log resumes: the configs already measured are not measured again.
local host = require "tunelua.host"
local autotvm = require "tunelua.autotvm"
local record = require "tunelua.autotvm.record"

-- every file under a fresh directory of this run, removed at the end
local util = require "tests.lua.lib.util"
local dir = util.tmpdir("tune-resume")
assert(dir:match("^/[%w/._-]+$"), dir)
local base = dir .. "/tune_resume"
local log = base .. ".log"
local script = base .. "_child.lua"

-- a space of 121 configs: the child cannot finish it between two polls below
local ARGS = [[{ { "TENSOR", { 1, 1024 }, "float32" }, { "TENSOR", { 1024, 1024 }, "float32" }, "None", "float32" }]]
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

-- the child tunes in the background; SIGKILL it once it has logged two trials
local tmp = log .. ".tmp"
local pidfile = base .. ".pid"
os.execute(string.format("%s %s >/dev/null 2>&1 & echo $! > %s", host.exe, script, pidfile))
local pid = assert(io.open(pidfile)):read("*n")
local function count_lines(path)
  local fh = io.open(path)
  if not fh then return 0 end
  local n = 0
  for line in fh:lines() do if line:sub(-1) == "}" then n = n + 1 end end
  fh:close()
  return n
end
local t0 = os.time()
while count_lines(tmp) < 2 do
  assert(os.time() - t0 < 120, "the child logged no two trials in 120 s")
  os.execute("sleep 0.05")
end
os.execute("kill -9 " .. pid)
-- gone (or a zombie nobody reaped yet: it writes nothing either way) within 5 s
for _ = 1, 100 do
  if os.execute("kill -0 " .. pid .. " 2>/dev/null") ~= 0 then break end
  os.execute("sleep 0.05")
end
os.remove(pidfile)
assert(io.open(log) == nil, "the child finished before it was killed")
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
-- the killed child's measurement directory (under TMPDIR or /tmp) was removed by the resumed
-- tuner, though this process had made another kind of directory first
local mbase = os.getenv("TUNELUA_MEASURE_DIR") or os.getenv("TMPDIR") or "/tmp"
local stale = io.popen("ls -d " .. mbase .. "/tunelua-measure-" .. pid .. "-* 2>/dev/null"):read("*a")
assert(stale == "", "the killed tuner's measurement directory is left: " .. stale)
os.remove(log)
os.remove(script)
local left = io.popen("ls -A " .. dir):read("*a")
assert(left == "", "left behind in " .. dir .. ": " .. left)
util.cleanup(dir)
print("test_tune_resume: ok (" .. ndone .. " trials before the kill)")
