-- The persistent OpenCL measurement worker (docs/measure_opencl.md, "The worker"): many trials
-- through one tunelua-measure-opencl --worker process, a kernel that crashes it, one that hangs,
-- one the driver refuses, a wrong answer and a device compile past its limit in the middle of a
-- batch (each reported as with a child per trial, and the next trial measured by a fresh
-- worker), a worker killed between jobs, the same inputs measured with a child per trial (the
-- same error numbers, costs where the worker has costs), an auto-scheduler tuning through the
-- local runner, and no process of ours left behind (no zombie, no orphan). On pocl here.
local ffi = require "ffi"
local core = require "tunelua.core"
local util = require "tests.lua.lib.util"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local am = require "tunelua.autotvm.measure"
local mo = require "tunelua.autotvm.measure_opencl"

local C, ctx = core.C, core.ctx
local E = am.MeasureErrorNo
ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); int kill(int pid, int sig); ]]

local info, why = mo.device_info(0)
if not info then
  print("SKIP test_measure_opencl_worker: no OpenCL device (" .. tostring(why) .. ")")
  return
end

local dir = util.tmpdir("ocl-worker")
ffi.C.setenv("TUNELUA_MEASURE_DIR", dir, 1)   -- job and reference files, if any, go here
local me = ffi.C.getpid()

-- processes whose parent is this one (zombies included), from /proc
local function children() return util.children(me) end

-- whether a process exists at all (a zombie does: reaped means gone)
local exists = util.pid_exists

-- ---- kernels as OpenCL C + manifest: C = A + B over 256 floats, and broken variants ----------
local MANIFEST = '{"format": "tunelua-opencl-module", "version": 1, "name": "add", "args": [' ..
  '{"dtype": "float32", "shape": [256]}, {"dtype": "float32", "shape": [256]}, ' ..
  '{"dtype": "float32", "shape": [256]}], "temps": [], "kernels": [{"name": "add_kernel0", ' ..
  '"grid": [8, 1, 1], "block": [32, 1, 1], "local_bytes": 0, "slots": [0, 1, 2]}], ' ..
  '"fp16": false, "fp64": false}'
local HEAD = "__kernel __attribute__((reqd_work_group_size(32, 1, 1)))\n" ..
  "void add_kernel0(__global float *restrict A, __global float *restrict B, " ..
  "__global float *restrict C) {\n  int i = (int)(get_group_id(0) * 32 + get_local_id(0));\n"
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local fresh = 1 + math.random(1, 1000000) / 1048576   -- keeps the driver's program cache cold
local BODY = {
  good = "  C[i] = A[i] + B[i];\n}\n",
  other = "  C[i] = A[i] - B[i];\n}\n",
  crash = "  if (i == 7) *((__global volatile float *)(ulong)16) = 1.0f;\n  C[i] = A[i] + B[i];\n}\n",
  hang = "  float s = 0;\n  for (ulong k = 0; k < 17179869184UL; k++) s += A[(k * 7) & 255];\n" ..
         "  C[i] = s;\n}\n",
  broken = "  C[i] = A[i] + ;\n}\n",
  slow_build = string.format("  C[i] = A[i] * %.9ff + B[i];\n}\n", fresh),
}
local paths = {}
local function path_of(kind)
  if not paths[kind] then
    local p = dir .. "/" .. kind .. ".cl"
    local f = assert(io.open(p, "w"))
    assert(f:write(HEAD .. BODY[kind]))
    assert(f:close())
    paths[kind] = p
  end
  return paths[kind]
end
local man_path = dir .. "/add.json"
do
  local f = assert(io.open(man_path, "w"))
  assert(f:write(MANIFEST))
  assert(f:close())
end

-- one trial of a kernel kind: {eno, costs = {...}, msg}
local function trial(kind, o)
  o = o or {}
  local costs, nc, en, mg = ffi.new("double[2]"), ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("char *[1]")
  local ref = o.ref and path_of(o.ref) or nil
  local rc = C.tl_measure_run_opencl(ctx, path_of(kind), man_path, 0, 1, 2, 0, o.build_s or 20,
                                     o.run_s or 1, ref, ref and man_path or nil, 1e-4, costs, nc, en, mg)
  assert(rc == 0, core.errmsg())
  local r = { eno = tonumber(en[0]), costs = {}, msg = mg[0] ~= nil and ffi.string(mg[0]) or nil }
  if mg[0] ~= nil then C.tl_measure_str_free(mg[0]) end
  for i = 0, nc[0] - 1 do r.costs[#r.costs + 1] = tonumber(costs[i]) end
  return r
end

local function valid(r, what)
  assert(r.eno == 0, what .. ": " .. am.error_name(r.eno) .. ": " .. tostring(r.msg))
  assert(#r.costs == 2 and r.costs[1] > 0 and r.costs[2] > 0, what .. ": two costs > 0")
end

-- the cases, in order, with what each must give
local CASES = {
  { "good" }, { "good" }, { "good" },
  { "crash", eno = E.RUNTIME_DEVICE, msg = "crashed while running: signal 11", ends = true },
  { "good" },
  { "hang", eno = E.RUN_TIMEOUT, msg = "timed out after 1 s", ends = true, o = { build_s = 3 } },
  { "good" },
  { "broken", eno = E.COMPILE_DEVICE, msg = "build failed" },
  { "good", o = { ref = "good" } },
  { "good", eno = E.WRONG_ANSWER, msg = "argument 3 differs from the reference", o = { ref = "other" } },
  { "slow_build", eno = E.BUILD_TIMEOUT, msg = "compiling for the device timed out", ends = true,
    o = { build_s = 0.02 } },
  { "good" },
}

local function run_cases(with_worker)
  mo.use_worker(with_worker)
  local out = {}
  for i, c in ipairs(CASES) do
    local before = mo.worker_pid()
    local r = trial(c[1], c.o)
    local what = string.format("%s case %d (%s)", with_worker and "worker" or "child", i, c[1])
    if c.eno then
      assert(r.eno == c.eno, what .. ": expected " .. am.error_name(c.eno) .. ", got " ..
             am.error_name(r.eno) .. ": " .. tostring(r.msg))
      assert(tostring(r.msg):find(c.msg, 1, true), what .. ": message " .. tostring(r.msg))
      assert(#r.costs == 0, what .. ": no costs")
    else
      valid(r, what)
    end
    local after = mo.worker_pid()
    if with_worker then
      if c.ends then
        -- the worker that crashed or hung is gone, reaped; the next trial starts another
        assert(after == nil, what .. ": the worker was replaced")
        assert(before and not exists(before), what .. ": the old worker " .. tostring(before) .. " is gone")
      else
        assert(after ~= nil, what .. ": a worker runs")
        if i > 1 and not CASES[i - 1].ends then
          assert(after == before, what .. ": the same worker (" .. tostring(before) .. " -> " .. tostring(after) .. ")")
        end
      end
    else
      assert(after == nil, what .. ": no worker with a child per trial")
    end
    out[i] = r
  end
  return out
end

-- 1. the batch through the worker
local now = function() return tonumber(C.tl_now()) end
local t0 = now()
local w = run_cases(true)
local t_worker = now() - t0
local p = mo.worker_pid()
assert(p, "a worker after the batch")

-- 2. a worker killed between jobs: the next trial gets a fresh one
assert(ffi.C.kill(p, 9) == 0)
local r = trial("good")
valid(r, "after the worker was killed")
assert(mo.worker_pid() and mo.worker_pid() ~= p, "a fresh worker after the kill")
assert(not exists(p), "the killed worker was reaped")

-- 3. the same inputs with a child per trial: the same outcomes
mo.stop_worker()
local t1 = now()
local c = run_cases(false)
local t_child = now() - t1
for i = 1, #CASES do
  assert(w[i].eno == c[i].eno, string.format("case %d (%s): worker %s, child %s", i, CASES[i][1],
         am.error_name(w[i].eno), am.error_name(c[i].eno)))
  assert((#w[i].costs > 0) == (#c[i].costs > 0), string.format("case %d: costs in both or neither", i))
end
mo.use_worker(nil)

-- 4. auto-scheduler trials through the local runner, checked against the unscheduled DAG: two
-- rounds served by one worker, every trial valid; the same states with a child per trial agree
local x = te.placeholder({ 1, 6, 6, 8 }, "float32", "x")
local wt = te.placeholder({ 3, 3, 8, 8 }, "float32", "w")
local y = topi.nn.conv2d_nhwc(x, wt, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
local task = auto_scheduler.SearchTask{ compute_dag = y, target = "opencl" }
local t2 = now()
local results, pids = {}, {}
local function runner() return am.LocalRunner({ number = 1, repeats = 2, timeout = 20, check_correctness = true }) end
local tr = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = 4, num_measures_per_round = 2,
  verbose = 0, builder = am.LocalBuilder({ timeout = 60, n_parallel = 2 }), runner = runner(),
  measure_callbacks = { function(_, st, res)
    results[#results + 1] = { st = st, res = res }
    pids[#pids + 1] = mo.worker_pid()
  end } },
  auto_scheduler.SketchPolicy(task, { seed = 5, program_cost_model = auto_scheduler.RandomModel(),
                                      params = { evolutionary_search_population = 64 } }))
assert(tr.trials == 4 and #results == 4, "4 trials measured")
for i, t in ipairs(results) do
  assert(t.res.error_no == 0, string.format("trial %d: %s: %s", i, am.error_name(t.res.error_no), tostring(t.res.error_msg)))
  assert(pids[i] and pids[i] == pids[1], "one worker for every trial: " .. table.concat(pids, ", "))
end
local t_tune = now() - t2
local t_search = 0
for _, s in ipairs(tr.round_seconds) do t_search = t_search + s end
mo.use_worker(false)
local t3 = now()
local mt = search.measure_task(task)
local inputs = {}
for i, t in ipairs(results) do
  mt.states[i] = t.st
  inputs[i] = am.MeasureInput(mt, i)
end
local again = am.create_measure_batch(mt, am.measure_option({ builder = am.LocalBuilder({ timeout = 60 }),
                                                              runner = runner() }))(inputs)
for i, res in ipairs(again) do
  assert(res.error_no == 0 and res.costs[1] > 0 and res.costs[1] < 1e9,
         string.format("trial %d with a child per trial: %s: %s", i, am.error_name(res.error_no), tostring(res.error_msg)))
end
local t_again = now() - t3
mo.use_worker(nil)

-- 5. nothing left: the worker stopped and reaped, no child of ours (live or zombie)
local last = mo.worker_pid()
mo.stop_worker()
C.tl_measure_opencl_wait_ahead()
assert(mo.worker_pid() == nil, "stopped")
assert(pids[1] and not exists(pids[1]) and (not last or not exists(last)), "the workers are gone")
local left = children()
assert(#left == 0, "processes of ours left behind: " .. table.concat(left, ", "))
util.cleanup(dir)
print(string.format("test_measure_opencl_worker: %d cases through the worker (%.1f s) and with a child per " ..
                    "trial (%.1f s) agree; %d auto-scheduler trials by one worker (%.1f s, of which " ..
                    "search %.1f s), again with a child per trial (%.1f s)", #CASES, t_worker, t_child, #results, t_tune,
                    t_search, t_again))
