-- Benchmark: OpenCL trials per second of an auto-scheduler tuning of one resnet-18 conv2d layer
-- (NHWC, batch 1, fp32) on OpenCL device 0 (docs/measure_opencl.md), in the same run, by where
-- trials are timed and candidates compiled ahead:
--   child    a child process per trial, a child per compile ahead;
--   worker   the persistent measurement worker, a child per compile ahead;
--   pool K   the worker, compiles ahead in a pool of K persistent compile workers
--            (--compile-workers=K[,K2...]; default 4);
--   no-ahead the worker, nothing compiled ahead (it compiles every candidate itself).
-- Every mode gets the same task, seed and search (RandomModel, and the initial population never
-- drawn from the measured states, so that every mode measures the same candidates; the table says
-- whether they did), each run with the driver's on-disk program caches fresh and empty
-- (POCL_CACHE_DIR, CUDA_CACHE_PATH under a temporary directory), so no mode compiles less than
-- another. The modes alternate --rounds times; the table has every run and the medians' ratios.
--
--   tunelua scripts/bench/ocl_worker.lua [--trials=32] [--per-round=16] [--layer=2]
--       [--rounds=1] [--population=256] [--number=3] [--min-repeat-ms=0] [--build-jobs=N]
--       [--build-timeout=20] [--overhead=20] [--touched] [--breakdown] [--compile-workers=4]
--
-- --layer: resnet-18's distinct conv2d layers as in scripts/bench/ansor_cpu.lua (1..11; 2 is
-- 64x56x56, 3x3, 64 filters). --touched initializes OpenCL in this process first, so that a
-- child per trial is a freshly exec'd tunelua-measure-opencl (as in a script that ran a kernel
-- before tuning); without it the children are forked. --overhead=N: then N trials of a tiny
-- kernel whose program is cached, in each mode: the fixed cost of a trial (0: skipped); and
-- batches of --per-round small kernels never compiled before, compiled ahead (or not) and
-- measured, in each mode: what a compile ahead costs per trial without the layer's own work.
-- --build-jobs: the builder's n_parallel
-- (compiles ahead on pocl and NVIDIA; default: the cores). --breakdown: after the runs, where
-- one trial's time goes, in this process: starting a tunelua-measure-opencl (exec and loading
-- the libraries), the driver's platform enumeration, context and first compile, further
-- compiles, the first and second launch, and the time evaluator.
--
-- On the accelerator machine (the packed build, scripts/device/pack.sh):
--
--   sh scripts/device/run_h200.sh scripts/bench/ocl_worker.lua --trials=32 --rounds=2 --touched \
--       --compile-workers=4,8 --overhead=32 --breakdown
local tl = require "tunelua"
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local json = require "tunelua.json"
local file = require "tunelua.file"
local median = require("tunelua.stats").median
local mo = require "tunelua.autotvm.measure_opencl"

local C, ctx = tl.core.C, tl.core.ctx
ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); ]]

local opts = { trials = "32", ["per-round"] = "16", layer = "2", rounds = "1", population = "256",
               number = "3", ["min-repeat-ms"] = "0", ["build-timeout"] = "20", overhead = "20" }
local KNOWN = { trials = 1, ["per-round"] = 1, layer = 1, rounds = 1, population = 1, number = 1,
                ["min-repeat-ms"] = 1, ["build-jobs"] = 1, ["build-timeout"] = 1, touched = 1,
                breakdown = 1, overhead = 1, ["compile-workers"] = 1 }
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-([%w-]+)=(.*)$")
  if not k and a:match("^%-%-") then k, v = a:sub(3), true end
  if not k or not KNOWN[k] then
    error("ocl_worker: unexpected argument '" .. a .. "' (see the header of this script)", 0)
  end
  opts[k] = v
end
local function num_opt(k, lo)
  local v = tonumber(opts[k])
  if not v or v % 1 ~= 0 or v < lo then
    error(string.format("ocl_worker: --%s=%s: expected an integer >= %d", k, tostring(opts[k]), lo), 0)
  end
  return v
end
local TRIALS, PER_ROUND, ROUNDS = num_opt("trials", 1), num_opt("per-round", 1), num_opt("rounds", 1)
local P, NUMBER, MIN_MS = num_opt("population", 1), num_opt("number", 1), num_opt("min-repeat-ms", 0)
local BUILD_TIMEOUT = num_opt("build-timeout", 1)
local OVERHEAD = num_opt("overhead", 0)
local BUILD_JOBS = opts["build-jobs"] and num_opt("build-jobs", 1) or tl.num_cores()
local POOLS = {}
for k in tostring(opts["compile-workers"] or "4"):gmatch("[^,]+") do
  local v = tonumber(k)
  if not v or v % 1 ~= 0 or v < 1 or v > 32 then
    error("ocl_worker: --compile-workers=" .. tostring(opts["compile-workers"]) ..
          ": expected integers 1..32, separated by commas", 0)
  end
  POOLS[#POOLS + 1] = v
end
local MODES = { "child", "worker" }
for _, k in ipairs(POOLS) do MODES[#MODES + 1] = "pool " .. k end
MODES[#MODES + 1] = "no-ahead"
local LABEL = { child = "child per trial", worker = "worker, child per compile ahead",
                ["no-ahead"] = "worker, no compile ahead" }
for _, k in ipairs(POOLS) do LABEL["pool " .. k] = "worker + compile pool of " .. k end

local LAYERS = {
  {3, 224, 64, 7, 2, 3}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 0},
  {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
  {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
  {512, 7, 512, 3, 1, 1},
}
local L = LAYERS[num_opt("layer", 1)]
if not L then error("ocl_worker: --layer: expected 1.." .. #LAYERS, 0) end

local info, why = mo.device_info(0)
if not info then error("ocl_worker: no OpenCL device: " .. tostring(why), 0) end
if opts.touched then
  assert(C.tl_opencl_device_count() > 0)   -- this process has initialized OpenCL now
end

local function make_task()
  local Ci, H, O, K, S, Pd = L[1], L[2], L[3], L[4], L[5], L[6]
  local x = te.placeholder({ 1, H, H, Ci }, "float32", "x")
  local w = te.placeholder({ K, K, Ci, O }, "float32", "w")
  local y = topi.nn.conv2d_nhwc(x, w, { strides = S, padding = { Pd, Pd, Pd, Pd }, dilation = 1 })
  return auto_scheduler.SearchTask{ compute_dag = y, target = "opencl" }
end
local name = string.format("conv %dx%dx%d k%d s%d", L[1], L[2], L[3], L[4], L[5])

local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-oclw")
local now = function() return tonumber(C.tl_now()) end

local function fresh_caches(tag)
  local c = dir .. "/cache-" .. tag
  file.mkdirs(c .. "/pocl")
  file.mkdirs(c .. "/cuda")
  ffi.C.setenv("POCL_CACHE_DIR", c .. "/pocl", 1)
  ffi.C.setenv("CUDA_CACHE_PATH", c .. "/cuda", 1)
end

local function run(mode, k)
  fresh_caches(mode:gsub("%W", "") .. k)
  mo.stop_worker()
  mo.use_worker(mode ~= "child")
  local pool = tonumber(mode:match("^pool (%d+)$"))
  mo.compile_workers(pool or 0)
  mo.compile_ahead = mode ~= "no-ahead" and "auto" or false
  local sent0, lost0 = mo.compile_counts()
  for key in pairs(mo.stats) do mo.stats[key] = 0 end
  local task = make_task()
  local valid, best, steps = 0, math.huge, {}
  local t0 = now()
  local r = task:tune(auto_scheduler.TuningOptions{
    num_measure_trials = TRIALS, num_measures_per_round = PER_ROUND, verbose = 0,
    builder = auto_scheduler.LocalBuilder({ timeout = BUILD_TIMEOUT, n_parallel = BUILD_JOBS }),
    runner = auto_scheduler.LocalRunner({ number = NUMBER, min_repeat_ms = MIN_MS, timeout = 20 }),
    measure_callbacks = { function(_, st, res)
      steps[#steps + 1] = st:steps()
      if res.error_no == 0 then
        valid = valid + 1
        local m = 0
        for _, c in ipairs(res.costs) do m = m + c end
        best = math.min(best, m / #res.costs)
      end
    end } },
    auto_scheduler.SketchPolicy(task, { seed = 1, program_cost_model = auto_scheduler.RandomModel(),
                                        params = { evolutionary_search_population = P,
                                                   sample_init_use_measured_ratio = 0 } }))
  local wall = now() - t0
  local s = 0
  for _, x in ipairs(r.round_seconds) do s = s + x end
  local st = mo.stats
  mo.stop_worker()
  local sent1, lost1 = mo.compile_counts()
  mo.compile_workers(nil)
  mo.compile_ahead = "auto"
  return { mode = mode, trials = r.trials, valid = valid, wall = wall, search = s,
           pool_sent = sent1 - sent0, pool_lost = lost1 - lost0,
           per_trial = (wall - s) / math.max(1, r.trials), tps = r.trials / wall,
           run_s = st.child_s / math.max(1, st.runs), compile_s = st.compile_s / math.max(1, st.runs),
           wait_s = st.wait_s / math.max(1, st.runs),
           gflops = best < math.huge and task.flop / best / 1e9 or 0,
           candidates = table.concat(steps, "\n") }
end

io.write(string.format("OpenCL device: %s (%s); task: resnet-18 %s NHWC; %d trials, %d per round, " ..
                       "population %d, n_parallel %d, number %d; children per trial: %s\n",
                       tostring(info.name), tostring(info.platform), name, TRIALS, PER_ROUND, P,
                       BUILD_JOBS, NUMBER, opts.touched and "exec'd (OpenCL initialized here)" or "forked"))
local rows, by = {}, {}
for _, mode in ipairs(MODES) do by[mode] = {} end
for k = 1, ROUNDS do
  for _, mode in ipairs(MODES) do
    local r = run(mode, k)
    rows[#rows + 1] = r
    by[mode][#by[mode] + 1] = r.tps
    io.write(string.format("  run %d %-8s: %d trials in %.1f s%s\n", k, mode, r.trials, r.wall,
                           r.pool_sent > 0 and string.format(" (%d compiles in the pool, %d lost)",
                                                             r.pool_sent, r.pool_lost) or ""))
    io.flush()
  end
end
mo.use_worker(nil)

io.write("\n| measured by | trials (valid) | wall s | search s | s/trial outside the search | " ..
         "trial's process s | driver compile s | compile-ahead wait s | trials/s | best GFLOPS |\n")
io.write("|---|---|---|---|---|---|---|---|---|---|\n")
for _, r in ipairs(rows) do
  io.write(string.format("| %s | %d (%d) | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.2f | %.1f |\n",
    LABEL[r.mode], r.trials, r.valid, r.wall, r.search,
    r.per_trial, r.run_s, r.compile_s, r.wait_s, r.tps, r.gflops))
end
local same = true
for _, r in ipairs(rows) do same = same and r.candidates == rows[1].candidates end
io.write(string.format("\nevery run measured the same candidates: %s\n", same and "yes" or
                       "no (the search differed between runs)"))
local parts = {}
for _, mode in ipairs(MODES) do
  parts[#parts + 1] = string.format("%s %.2f (%.2fx child, %.2fx worker)", LABEL[mode], median(by[mode]),
                                    median(by[mode]) / median(by.child), median(by[mode]) / median(by.worker))
end
io.write("trials/s, median: " .. table.concat(parts, "; ") .. "\n")

-- ---- the fixed cost of a trial: a tiny kernel, compiled once ----------------------------------------
-- --overhead=N trials (default 20) of a 256-element add through tl_measure_run_opencl in each mode:
-- after the first, the driver's program cache answers and the kernel takes microseconds, so what
-- is left is starting the trial's process (or not), the driver and its context, and the timing.
if OVERHEAD > 0 then
  local A = te.placeholder({ 256 }, "float32", "A")
  local B = te.placeholder({ 256 }, "float32", "B")
  local Cc = te.compute({ 256 }, function(i) return A(i) + B(i) end, "C")
  local s = te.create_schedule(Cc.op)
  local xo, xi = s[Cc]:split(Cc.op.axis[1], { factor = 32 })
  s[Cc]:bind(xo, "blockIdx.x")
  s[Cc]:bind(xi, "threadIdx.x")
  local l = tl.lower(s, { A, B, Cc }, "add")
  local sp, mp, en, mg = ffi.new("char *[1]"), ffi.new("char *[1]"), ffi.new("int[1]"), ffi.new("char *[1]")
  assert(C.tl_measure_opencl_source(ctx, l.handle, sp, mp, en, mg) == 0 and en[0] == 0)
  local src_path, man_path = dir .. "/add.cl", dir .. "/add.json"
  file.write_all(src_path, ffi.string(sp[0]))
  file.write_all(man_path, ffi.string(mp[0]))
  C.tl_measure_str_free(sp[0])
  C.tl_measure_str_free(mp[0])
  fresh_caches("overhead")
  local per = {}
  for _, mode in ipairs({ "child", "worker" }) do
    mo.use_worker(mode == "worker")
    local costs, nc = ffi.new("double[1]"), ffi.new("int[1]")
    local ts = {}
    for k = 0, OVERHEAD do
      local t0 = now()
      assert(C.tl_measure_run_opencl(ctx, src_path, man_path, 0, 1, 1, 0, BUILD_TIMEOUT, 10, nil, nil,
                                     1e-4, costs, nc, en, mg) == 0, tl.core.errmsg())
      if en[0] ~= 0 then error("overhead trial: " .. ffi.string(mg[0]), 0) end
      if k > 0 then ts[#ts + 1] = now() - t0 end   -- the first one compiles
    end
    mo.stop_worker()
    per[mode] = median(ts)
  end
  mo.use_worker(nil)
  io.write(string.format("\nfixed cost per trial (a 256-element add, its program cached; median of %d): " ..
                         "child per trial %.1f ms, worker %.1f ms (%.1fx)\n", OVERHEAD,
                         per.child * 1e3, per.worker * 1e3, per.child / per.worker))

  -- then batches of --per-round small kernels never compiled before (a fresh constant each): a
  -- batch's compiles ahead (or none), then its trials, per mode; seconds per trial, median of the
  -- batches (the first batch of each mode, which starts the processes, is left out)
  local function fresh_add(c)
    local a = te.placeholder({ 4096 }, "float32", "A")
    local b = te.placeholder({ 4096 }, "float32", "B")
    local y = te.compute({ 4096 }, function(i) return a(i) * c + b(i) end, "C")
    local sc = te.create_schedule(y.op)
    local bo, bi = sc[y]:split(y.op.axis[1], { factor = 64 })
    sc[y]:bind(bo, "blockIdx.x")
    sc[y]:bind(bi, "threadIdx.x")
    return tl.lower(sc, { a, b, y }, "axpy")
  end
  local serial, fresh_per = 0, {}
  local batches = math.max(2, math.ceil(OVERHEAD / PER_ROUND)) + 1
  for _, mode in ipairs(MODES) do
    fresh_caches("fresh" .. mode:gsub("%W", ""))
    mo.stop_worker()
    mo.use_worker(mode ~= "child")
    mo.compile_workers(tonumber(mode:match("^pool (%d+)$")) or 0)
    local ts = {}
    for bi = 1, batches do
      local ls = {}
      for k = 1, PER_ROUND do
        serial = serial + 1
        ls[k] = fresh_add(1 + serial / 4096)
      end
      local costs, nc, secs = ffi.new("double[1]"), ffi.new("int[1]"), ffi.new("double[2]")
      local t0 = now()
      if mode ~= "no-ahead" then
        for _, l in ipairs(ls) do C.tl_measure_opencl_compile_ahead(ctx, l.handle, 0, BUILD_TIMEOUT, BUILD_JOBS) end
      end
      for _, l in ipairs(ls) do
        C.tl_measure_opencl_wait_ahead()
        assert(C.tl_measure_opencl_run(ctx, l.handle, "axpy", 0, 1, 1, 0, BUILD_TIMEOUT, 10, nil, 1e-4,
                                       costs, nc, en, mg, secs) == 0, tl.core.errmsg())
        if en[0] ~= 0 then error("fresh kernel trial (" .. mode .. "): " .. ffi.string(mg[0]), 0) end
      end
      if bi > 1 then ts[#ts + 1] = (now() - t0) / PER_ROUND end
    end
    mo.stop_worker()
    fresh_per[#fresh_per + 1] = string.format("%s %.1f ms", LABEL[mode], median(ts) * 1e3)
  end
  mo.compile_workers(nil)
  mo.use_worker(nil)
  io.write(string.format("per trial of a small kernel never compiled before (batches of %d, n_parallel %d; " ..
                         "median of %d batches): %s\n", PER_ROUND, BUILD_JOBS, batches - 1,
                         table.concat(fresh_per, ", ")))
end

-- ---- where one trial's time goes ------------------------------------------------------------------
if opts.breakdown then
  fresh_caches("breakdown")
  local task = make_task()
  local pol = auto_scheduler.SketchPolicy(task, { seed = 99, program_cost_model = auto_scheduler.RandomModel(),
                                                  params = { evolutionary_search_population = P } })
  local states = pol:next_batch(4)
  local mt = search.measure_task(task)
  local mods = {}
  for i, st in ipairs(states) do
    mt.states[i] = st
    local l = mt:lower(i)
    local sp, mp, en, mg = ffi.new("char *[1]"), ffi.new("char *[1]"), ffi.new("int[1]"), ffi.new("char *[1]")
    local t0 = now()
    assert(C.tl_measure_opencl_source(ctx, l.handle, sp, mp, en, mg) == 0 and en[0] == 0)
    mods[i] = { src = ffi.string(sp[0]), man = ffi.string(mp[0]), gen = now() - t0 }
    C.tl_measure_str_free(sp[0])
    C.tl_measure_str_free(mp[0])
  end
  -- a tunelua-measure-opencl start: exec and loading its libraries (it prints its usage)
  local exe
  do
    local p = assert(io.open("/proc/self/maps"))
    for line in p:lines() do
      local lib = line:match("(/%S+/libtunelua%.so)")
      if lib then exe = lib:gsub("libtunelua%.so$", "tunelua-measure-opencl") break end
    end
    p:close()
  end
  local t_exec, t_sh = 0, 0
  if exe and file.exists(exe) then
    local t0 = now()
    for _ = 1, 10 do os.execute("'" .. exe .. "' >/dev/null 2>&1") end
    t_exec = (now() - t0) / 10
    t0 = now()
    for _ = 1, 10 do os.execute("true") end
    t_sh = (now() - t0) / 10
  end
  local fresh = not opts.touched
  local t0 = now()
  C.tl_opencl_device_count()
  local t_plat = now() - t0
  io.write(string.format("\nWhere a trial's time goes (this process, driver caches empty; %s):\n",
                         fresh and "platform enumeration measured on first use" or
                         "OpenCL was initialized before the runs, so enumeration is already done"))
  io.write(string.format("  start tunelua-measure-opencl (exec + libraries): %.3f s\n", t_exec - t_sh))
  io.write(string.format("  driver platform enumeration: %.3f s\n", t_plat))
  for i, m in ipairs(mods) do
    local h = ffi.new("tl_ocl_module *[1]")
    t0 = now()
    assert(C.tl_ocl_module_from_source(ctx, m.src, m.man, 0, h) == 0, tl.core.errmsg())
    local t_build = now() - t0
    local comp = C.tl_ocl_module_compile_seconds(h[0])
    local man = json.decode(m.man)
    local arrs, keep = ffi.new("tl_array *[?]", #man.args), {}
    local nd = require "tunelua.nd"
    t0 = now()
    for k, a in ipairs(man.args) do
      keep[k] = nd.random_uniform(a.shape, { seed = k }):copyto("opencl:0")
      arrs[k - 1] = keep[k]
    end
    local t_args = now() - t0
    t0 = now()
    assert(C.tl_ocl_module_call(ctx, h[0], arrs, #man.args) == 0, tl.core.errmsg())
    local t_first = now() - t0
    t0 = now()
    assert(C.tl_ocl_module_call(ctx, h[0], arrs, #man.args) == 0, tl.core.errmsg())
    local t_second = now() - t0
    local secs = ffi.new("double[3]")
    t0 = now()
    assert(C.tl_ocl_module_time(ctx, h[0], arrs, #man.args, NUMBER, 3, MIN_MS, 0, secs) == 0, tl.core.errmsg())
    local t_time = now() - t0
    io.write(string.format("  kernel %d: OpenCL C %.3f s; module %.3f s (driver compile %.3f s%s); " ..
                           "arguments %.3f s; first launch %.3f s; second %.3f s; time evaluator " ..
                           "(number %d, repeat 3) %.3f s\n", i, m.gen, t_build, comp,
                           i == 1 and ", with the context" or "", t_args, t_first, t_second, NUMBER, t_time))
    C.tl_ocl_module_free(h[0])
  end
end
file.remove(dir)
