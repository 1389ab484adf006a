-- Compiling OpenCL candidates ahead (docs/measure_opencl.md, "Compiling ahead"): the same batch
-- measured with the compile pool (persistent tunelua-measure-opencl --worker processes), with a
-- child per compile, and with nothing compiled ahead gives the same error numbers, and costs for
-- the same candidates: normal kernels, one refused before compiling (oversized work-group), one
-- whose compile passes the builder's limit (its pool worker ends by its alarm and is replaced),
-- and the pool's workers killed in the middle of a compile (SIGKILL: the driver's compiler catches
-- a SIGSEGV sent from outside; they are replaced and the trial compiles itself). Then no process of ours is left. On pocl here.
local ffi = require "ffi"
local core = require "tunelua.core"
local util = require "tests.lua.lib.util"
local autotvm = require "tunelua.autotvm"
local am = require "tunelua.autotvm.measure"
local mo = require "tunelua.autotvm.measure_opencl"

local C = core.C
local E = am.MeasureErrorNo
ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name);
             int kill(int pid, int sig); ]]

local info, why = mo.device_info(0)
if not info then
  print("SKIP test_measure_opencl_ahead: no OpenCL device (" .. tostring(why) .. ")")
  return
end
if not mo.ahead_enabled(info, { n_parallel = 2 }) then
  print("SKIP test_measure_opencl_ahead: the driver keeps no program cache on disk (" ..
        tostring(info.platform) .. ")")
  return
end

-- a malformed pool size in the environment is an error naming it
ffi.C.setenv("TUNELUA_OCL_COMPILE_WORKERS", "four", 1)
local okm, em = pcall(mo.ahead_enabled, info, { n_parallel = 2 })
assert(not okm and tostring(em):find("TUNELUA_OCL_COMPILE_WORKERS='four': expected", 1, true), tostring(em))
ffi.C.unsetenv("TUNELUA_OCL_COMPILE_WORKERS")
local okv = pcall(mo.compile_workers, -1)
assert(not okv, "compile_workers(-1) is refused")

local dir = util.tmpdir("ocl-ahead")
ffi.C.setenv("TUNELUA_MEASURE_DIR", dir, 1)
local me = ffi.C.getpid()

-- processes whose parent is this one (zombies included), from /proc
local function children() return util.children(me) end
local exists = util.pid_exists

-- C = A * c + B, c a fresh constant per trial so that the driver's program cache never answers
autotvm.task.register("ocla_axpy.test", util.gpu_add)
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local salt = math.random(1, 16000)
local counter = 0
local function fresh_task(n)
  counter = counter + 1
  return autotvm.task.create("ocla_axpy.test", { n, salt * 1000 + counter }, "opencl")
end
local MAXWG = assert(tonumber(info.max_work_group_size), "the device's max_work_group_size")
local BIG = 1
while BIG <= MAXWG do BIG = BIG * 2 end   -- a power of two past the device's work-group limit
local function config_with(t, threads)
  for i = 0, #t.config_space - 1 do
    local c = t.config_space:get(i)
    if c:entity()[1][3][2] == threads then return c end
  end
  error("no config with " .. threads .. " threads")
end

-- the batch: {kind, builder timeout, what it must give}
local CASES = {
  { "good" }, { "good" }, { "good" },
  { "oversized", eno = E.INSTANTIATION_ERROR },
  { "good" },
  { "slow_build", timeout = 0.002, eno = E.BUILD_TIMEOUT, lost = true },
  { "good" },
  { "crash", lost = true },   -- the pool's workers killed while one compiles
  { "good" }, { "good" },
}

local runner = autotvm.LocalRunner({ number = 1, ["repeat"] = 2, timeout = 10, cooldown_interval = 0 })

local function run_batch(mode)
  if mode == "pool" then
    mo.compile_ahead = "auto"
    mo.compile_workers(2)
  elseif mode == "child" then
    mo.compile_ahead = "auto"
    mo.compile_workers(0)
  else
    mo.compile_ahead = false
  end
  local out = {}
  for i, c in ipairs(CASES) do
    local what = string.format("%s case %d (%s)", mode, i, c[1])
    local t = fresh_task(c[1] == "oversized" and BIG or 1024)
    local cfg = config_with(t, c[1] == "oversized" and BIG or 64)
    local inp = am.MeasureInput(t, cfg)
    local sent0, lost0 = mo.compile_counts()
    local br = mo.build_one({ timeout = c.timeout or 20, n_parallel = 2 }, inp)
    local sent1 = mo.compile_counts()
    local killed = {}
    if mode == "pool" then
      -- the pool got the compile exactly when the build passed (never for a refused one)
      assert(sent1 == sent0 + (br.error_no == 0 and 1 or 0), what .. ": one compile sent to the pool")
      assert(#mo.compile_worker_pids() >= 1 and #mo.compile_worker_pids() <= 2, what .. ": 1 or 2 pool workers")
      if c[1] == "crash" then
        for _, pid in ipairs(mo.compile_worker_pids()) do
          assert(ffi.C.kill(pid, 9) == 0)
          killed[#killed + 1] = pid
        end
      end
    else
      assert(sent1 == sent0, what .. ": the pool is not used")
    end
    local r = br
    if br.error_no == 0 then
      r = mo.run_one(runner, inp, br)
    else
      r = am.MeasureResult({ 1e9 }, br.error_no, br.time_cost, os.time(), br.error_msg)
    end
    local _, lost1 = mo.compile_counts()
    if mode == "pool" then
      assert(lost1 == lost0 + (c.lost and 1 or 0), string.format("%s: compiles lost %d -> %d", what, lost0, lost1))
      for _, pid in ipairs(killed) do assert(not exists(pid), what .. ": the killed worker was reaped") end
    end
    if c.eno then
      assert(r.error_no == c.eno, what .. ": expected " .. am.error_name(c.eno) .. ", got " ..
             am.error_name(r.error_no) .. ": " .. tostring(r.error_msg))
    else
      assert(r.error_no == 0, what .. ": " .. am.error_name(r.error_no) .. ": " .. tostring(r.error_msg))
      assert(#r.costs == 2 and r.costs[1] > 0 and r.costs[1] < 1e9, what .. ": two costs")
    end
    out[i] = r
  end
  return out
end

local t0 = tonumber(C.tl_now())
local results = {}
for _, mode in ipairs({ "pool", "child", "none" }) do
  results[mode] = run_batch(mode)
end
for i = 1, #CASES do
  local p, c, n = results.pool[i], results.child[i], results.none[i]
  assert(p.error_no == c.error_no and p.error_no == n.error_no, string.format(
         "case %d: pool %s, child per compile %s, none %s", i, am.error_name(p.error_no),
         am.error_name(c.error_no), am.error_name(n.error_no)))
  assert(#p.costs == #c.costs and #p.costs == #n.costs, string.format("case %d: as many costs", i))
end
local sent, lost = mo.compile_counts()
mo.compile_ahead = "auto"
mo.compile_workers(nil)

-- the pool's workers survive between batches until stopped; then nothing of ours is left
mo.compile_workers(2)
local pids = mo.compile_worker_pids()
assert(#pids >= 1, "the pool's workers are still there")
mo.stop_worker()
assert(#mo.compile_worker_pids() == 0, "the pool stopped")
for _, pid in ipairs(pids) do assert(not exists(pid), "pool worker " .. pid .. " is gone") end
mo.compile_workers(nil)
local left = children()
assert(#left == 0, "processes of ours left behind: " .. table.concat(left, ", "))
util.cleanup(dir)
print(string.format("test_measure_opencl_ahead: %d cases with the compile pool, a child per compile and " ..
                    "no compile ahead agree (%d compiles sent to the pool, %d lost); %.1f s", #CASES, sent,
                    lost, tonumber(C.tl_now()) - t0))
