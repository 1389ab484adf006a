-- search_efficiency.lua: how fast each template tuner finds fast configs.
--
--   tunelua scripts/bench/search_efficiency.lua               -- phase 1 (if not cached) + phase 2
--   tunelua scripts/bench/search_efficiency.lua --quick       -- a smoke run (see below)
--   options: --tuners xgb,xgb_rank,ga,random  --seeds 3  --checkpoints 64,128,256,512
--            --tasks 1,2,3  --cache DIR (default /tmp/tunelua-search-efficiency)
--            --n_parallel N (phase-1 parallel builds; default: cores)  --number 1 --repeats 5
--            --batch 8 (phase-2 batch = the replay builder's n_parallel)  --measure_only 1
--            --limit N (phase 1 measures at most N new configs per task in this run)
--            --plan_size N (xgb tuners; default: the tuner's, 32 or 16 on these spaces)
--            --passes 3 (phase-1 measurements of each config, each pass in its own order)
--            --target T (default: llvm -mcpu=skylake-avx512 on an AVX-512 host, else core-avx2)
--
-- The x86 conv2d spaces are small (360-784 configs), so 4 tuners x 3 seeds x 512 trials would
-- measure the same configs over and over. The benchmark therefore runs in two phases:
--
--   phase 1 (real measurement): every config of each task's space is built (LocalBuilder,
--     parallel compiles) and run (LocalRunner, serial, number x repeat) once per pass
--     (--passes, default 3), each pass in its own shuffled order so that machine-load drift
--     does not favour a region of the space. The costs go to a cache file per task (appended
--     per batch: an interrupted run resumes), with the wall time of each build and run batch;
--     that is the throughput table. A config's replayed cost is its fastest pass (each pass
--     the median of its repeats), so one loaded moment does not make or break a config.
--   phase 2 (replay): every tuner and seed runs the ordinary tune loop (tuner, cost model,
--     annealing, GA all for real) against a replay builder/runner pair with the builder/runner
--     interface that answers each config with its phase-1 result (the median of its repeat
--     timings, or its error). Only the timing is replayed; all tuners see the same numbers, so
--     the comparison is exact and cheap.
--
-- The cost tables are keyed by the task and by the generated code of three of its configs, so
-- a change to a template or to code generation starts new tables.
--
-- Prints the best GFLOPS found after each checkpoint number of trials (mean of the seeds) per
-- tuner and task, the exhaustive best of each space, and the target: xgb reaches >= 95% of the
-- best that random finds in 512 trials within 128 trials.
--
-- --quick: phase 1 measures up to 16 configs of task 3 that are not cached yet; phase 2 runs xgb
-- and random (1 seed, 64 trials) only when the table of task 3 is complete.
local autotvm = require "tunelua.autotvm"
local measure = require "tunelua.autotvm.measure"
local tuner_mod = require "tunelua.autotvm.tuner"
local core = require "tunelua.core"
local bit = require "bit"

local now = function() return core.C.tl_now() end

-- ---- options ------------------------------------------------------------------------------
local opts = { tuners = "xgb,xgb_rank,ga,random", seeds = 3, checkpoints = "64,128,256,512",
               tasks = "1,2,3", n_parallel = core.C.tl_num_cores(), number = 1, repeats = 5,
               batch = 8, cache = "/tmp/tunelua-search-efficiency", limit = 1e9, measure_only = 0,
               plan_size = 0, passes = 3, target = false }
local argv = arg or {}
local i = 1
while i <= #argv do
  local a = argv[i]
  if a == "--quick" then
    opts.quick = true
  elseif a:match("^%-%-") then
    local k = a:sub(3)
    if opts[k] == nil then error("search_efficiency: unknown option " .. a, 0) end
    if argv[i + 1] == nil then error("search_efficiency: option " .. a .. " needs a value", 0) end
    opts[k] = argv[i + 1]
    i = i + 1
  else
    error("search_efficiency: unexpected argument " .. a, 0)
  end
  i = i + 1
end
if opts.quick then
  opts.tuners, opts.seeds, opts.checkpoints, opts.tasks, opts.limit = "xgb,random", 1, "32,64", "3", 16
  opts.passes = 1
end
local function list(s, num)
  local out = {}
  for x in tostring(s):gmatch("[^,]+") do out[#out + 1] = num and tonumber(x) or x end
  return out
end
local tuners, checkpoints, task_ids = list(opts.tuners), list(opts.checkpoints, true), list(opts.tasks, true)
local seeds = tonumber(opts.seeds)
local max_trial = checkpoints[#checkpoints]
-- The measured machine's x86 target: AVX-512 where the host has it (the spaces and tables of
-- the figures in docs/autotvm.md), else AVX2; --target names another.
local TARGET = opts.target or (require("tunelua.target").parse("llvm").lanes >= 16
  and "llvm -mcpu=skylake-avx512" or "llvm -mcpu=core-avx2")

-- ---- the tasks: three resnet-18 convolutions of different character (NCHW, batch 1) --------
local function conv(c, hw, k, kh, stride, pad)
  return { { "TENSOR", { 1, c, hw, hw }, "float32" }, { "TENSOR", { k, c, kh, kh }, "float32" },
           { stride, stride }, { pad, pad, pad, pad }, { 1, 1 }, "NCHW", "NCHW", "float32" }
end
local ALL = {
  { "3x3 s1 64->64 @56x56", conv(64, 56, 64, 3, 1, 1) },
  { "3x3 s2 128->256 @28x28", conv(128, 28, 256, 3, 2, 1) },
  { "1x1 s2 256->512 @14x14", conv(256, 14, 512, 1, 2, 0) },
}

-- ---- provenance: what code the costs were measured with --------------------------------------
local function sh(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return "" end
  local s = p:read("*a") or ""
  p:close()
  return (s:gsub("%s+$", ""))
end
-- The templates are compiled into libtunelua: what counts is the source the library was built
-- from, so the line gives the library's build time and flags a templates.c edited after it.
local function provenance()
  local head = sh("git rev-parse --short HEAD")
  local dirty = sh("git status --porcelain --untracked-files=normal | wc -l")
  local tmpl = sh("md5sum targets/x86/templates.c | cut -c1-12")
  local lib = sh("grep -o '/[^ ]*libtunelua[^ ]*' /proc/" .. sh("echo $PPID") .. "/maps | head -1")
  local lib_t = lib ~= "" and tonumber(sh("stat -c %Y '" .. lib .. "'")) or nil
  local tmpl_t = tonumber(sh("stat -c %Y targets/x86/templates.c"))
  return string.format("%s UTC, HEAD %s + %s changed/untracked paths, targets/x86/templates.c md5 %s%s, " ..
    "libtunelua built %s UTC", os.date("!%Y-%m-%d %H:%M"), head ~= "" and head or "?",
    dirty ~= "" and dirty or "?", tmpl ~= "" and tmpl or "?",
    (lib_t and tmpl_t and tmpl_t > lib_t) and " (EDITED AFTER THE BUILD)" or "",
    lib_t and os.date("!%H:%M", lib_t) or "?")
end

-- ---- the cost table cache (one file per task) ---------------------------------------------------
--   # <provenance line>            (one per phase-1 session)
--   B <n> <build wall s> <run wall s>
--   C <index> <error_no> <build s> <cost,cost,...> <error message or ->
local function ser(v)
  if type(v) == "table" then
    local p = {}
    for k = 1, #v do p[k] = ser(v[k]) end
    return "[" .. table.concat(p, ",") .. "]"
  end
  return tostring(v)
end
local function hash(s)
  local h = 5381
  for k = 1, #s do h = bit.band(bit.bxor(h * 33, s:byte(k)), 0x7fffffff) end
  return string.format("%08x", h)
end
-- A pass's cost of a config is the median of its repeat timings (phase 1 runs on a shared,
-- loaded machine, where one slow repeat moves a mean far more than a median).
local function median(c) return require("tunelua.stats").median(c) or 1e9 end
-- The table's key covers the code as well as the task: the generated source of three configs
-- (first, middle, last), so a table measured before a change to the template or the code
-- generator is never replayed as if it were current (a new table is measured instead).
local function code_key(task)
  local n = #task.config_space
  local parts = {}
  for _, idx in ipairs({ 0, math.floor(n / 2), n - 1 }) do
    parts[#parts + 1] = hash(measure.source_of(task:lower(idx)))
  end
  return table.concat(parts, "")
end
local function cache_path(task)
  local key = task.name .. "|" .. ser(task.args) .. "|" .. task.target .. "|" .. #task.config_space
  return string.format("%s/%s-%d-%s-%s.tsv", opts.cache, task.name, #task.config_space, hash(key),
    hash(code_key(task)))
end

-- Cache lines of a pass follow its "P <pass>" line (lines before any P line are pass 1). A
-- config's replayed cost is its fastest pass (each pass the median of its repeats): on a
-- shared machine interference only ever slows a run down, and a pass that caught a loaded
-- moment (this VM's passes differ by up to 3x for the same config) says nothing about the
-- config. A config that failed in every pass keeps its first error.
local function load_table(path)
  local tab = { costs = {}, n = 0, batches = { n = 0, build = 0, run = 0 }, notes = {}, pass_n = {} }
  local f = io.open(path, "r")
  if not f then return tab end
  local pass = 1
  for line in f:lines() do
    local kind = line:sub(1, 1)
    if kind == "#" then
      tab.notes[#tab.notes + 1] = line:sub(3)
    elseif kind == "P" then
      pass = tonumber(line:match("^P\t(%d+)")) or pass
    elseif kind == "B" then
      local n, b, r = line:match("^B\t(%d+)\t(%S+)\t(%S+)")
      if n then
        tab.batches.n = tab.batches.n + tonumber(n)
        tab.batches.build = tab.batches.build + tonumber(b)
        tab.batches.run = tab.batches.run + tonumber(r)
      end
    elseif kind == "C" then
      local idx, eno, bs, cs, msg = line:match("^C\t(%d+)\t(%d+)\t(%S+)\t(%S+)\t(.*)$")
      if idx then
        local c = {}
        for x in cs:gmatch("[^,]+") do c[#c + 1] = tonumber(x) end
        idx = tonumber(idx)
        local e = tab.costs[idx]
        if not e then
          e = { passes = {} }
          tab.costs[idx] = e
          tab.n = tab.n + 1
        end
        if not e.passes[pass] then tab.pass_n[pass] = (tab.pass_n[pass] or 0) + 1 end
        e.passes[pass] = { costs = c, median = median(c), error_no = tonumber(eno),
                           build_s = tonumber(bs), error_msg = msg ~= "-" and msg or nil }
      end
    end
  end
  f:close()
  for _, e in pairs(tab.costs) do
    local ok, first = {}, nil
    for p = 1, table.maxn(e.passes) do
      local r = e.passes[p]
      if r then
        first = first or r
        if r.error_no == 0 and #r.costs > 0 then ok[#ok + 1] = r.median end
      end
    end
    e.build_s = first.build_s
    e.npass = #ok
    if #ok > 0 then
      e.error_no, e.median = 0, math.min(unpack(ok))
      e.spread = #ok > 1 and (math.max(unpack(ok)) / math.min(unpack(ok))) or nil
    else
      e.error_no, e.median, e.error_msg = first.error_no, first.median, first.error_msg
    end
  end
  return tab
end

-- ---- phase 1: measure every config once per pass -------------------------------------------
-- Each pass measures the whole space in its own shuffled order, so a burst of load on a shared
-- machine rarely hits the same config in every pass.
local function phase1(task, desc)
  os.execute("mkdir -p '" .. opts.cache .. "'")
  local path = cache_path(task)
  local tab = load_table(path)
  local len = #task.config_space
  local budget = tonumber(opts.limit)
  for pass = 1, tonumber(opts.passes) do
    local todo = {}
    for k = 0, len - 1 do
      local e = tab.costs[k]
      if not (e and e.passes[pass]) then todo[#todo + 1] = k end
    end
    -- shuffled (a fixed seed per pass; pass 1 keeps the single-pass order)
    local rng = tuner_mod.new_rng(12345 + 7919 * (pass - 1))
    for k = #todo, 2, -1 do
      local j = 1 + rng:below(k)
      todo[k], todo[j] = todo[j], todo[k]
    end
    local limit = math.min(#todo, budget)
    if limit > 0 then
      budget = budget - limit
      io.write(string.format("phase 1, %s, pass %d: measuring %d of %d configs (%d cached) -> %s\n", desc,
        pass, limit, len, len - #todo, path))
      io.flush()
      local builder = measure.LocalBuilder({ n_parallel = tonumber(opts.n_parallel), timeout = 120 })
      local runner = measure.LocalRunner({ number = tonumber(opts.number), repeats = tonumber(opts.repeats),
                                           timeout = 20, cooldown_interval = 0 })
      runner:set_task(task)
      local f = assert(io.open(path, "a"))
      f:write(string.format("# %s; pass %d, number %s repeat %s, n_parallel %s, load %s\n", provenance(),
        pass, opts.number, opts.repeats, opts.n_parallel, sh("cut -d' ' -f1-3 /proc/loadavg")))
      f:write(string.format("P\t%d\n", pass))
      local B = 4 * tonumber(opts.n_parallel)
      local done, t_start = 0, now()
      while done < limit do
        local inputs = {}
        for k = done + 1, math.min(done + B, limit) do
          inputs[#inputs + 1] = measure.MeasureInput(task, task.config_space:get(todo[k]))
        end
        local t0 = now()
        local brs = builder:build(inputs)
        local t1 = now()
        local res = runner:run(inputs, brs)
        local t2 = now()
        f:write(string.format("B\t%d\t%.4f\t%.4f\n", #inputs, t1 - t0, t2 - t1))
        for k, r in ipairs(res) do
          local idx = inputs[k].config.index
          local c = {}
          for j, x in ipairs(r.costs) do c[j] = string.format("%.9g", x) end
          local msg = r.error_msg and tostring(r.error_msg):gsub("[\t\n\r]+", " "):sub(1, 300) or "-"
          f:write(string.format("C\t%d\t%d\t%.4f\t%s\t%s\n", idx, r.error_no, brs[k].time_cost or 0,
            table.concat(c, ","), msg ~= "" and msg or "-"))
        end
        f:flush()
        done = done + #inputs
        local el = now() - t_start
        io.write(string.format("  %d/%d  %.1f s, %.2f trials/s, eta %.0f s\n", done, limit, el, done / el,
          (limit - done) * el / done))
        io.flush()
      end
      f:close()
      tab = load_table(path)
    end
  end
  return tab, path
end

-- ---- phase 2: replay measured costs through the builder/runner interface -------------------------
-- ReplayBuilder "builds" nothing; ReplayRunner answers each input with the phase-1 MeasureResult
-- of its config (costs, error number and message), so the tune loop, the tuners, the XGBoost
-- model and the annealer run exactly as they do with LocalBuilder/LocalRunner.
local function ReplayBuilder(n_parallel)
  return { n_parallel = n_parallel, build = function(_, inputs)
    local out = {}
    for k = 1, #inputs do out[k] = { error_no = 0, time_cost = 0 } end
    return out
  end }
end
local function ReplayRunner(tables)
  local r = { n_parallel = 1, tables = tables, replayed = 0 }
  function r.set_task(self, task) self.table = self.tables[task] end
  function r.run(self, inputs, _)
    local out = {}
    for k, inp in ipairs(inputs) do
      local idx = tuner_mod.config_index(inp.config)
      local e = (self.tables[inp.task] or self.table).costs[idx]
      if not e then error("replay: config " .. idx .. " is not in the phase-1 cost table", 2) end
      out[k] = measure.MeasureResult({ e.median }, e.error_no, e.build_s, os.time(), e.error_msg)
      self.replayed = self.replayed + 1
    end
    return out
  end
  return r
end

local function flops_of(task, e)
  if e.error_no ~= 0 or not e.median then return 0 end
  return task.flop / e.median
end

-- ---- main ---------------------------------------------------------------------------------------
io.write(string.format("search efficiency: conv2d_NCHWc.x86 on %s; run %s\n", TARGET, provenance()))
local tasks, tables, complete = {}, {}, {}
local thr = { n = 0, build = 0, run = 0, errors = 0 }
for _, ti in ipairs(task_ids) do
  local desc, args = ALL[ti][1], ALL[ti][2]
  local task = autotvm.task.create("conv2d_NCHWc.x86", args, TARGET)
  tasks[ti] = task
  io.write(string.format("task %d: %s, %d configs, %.4f GFLOP\n", ti, desc, #task.config_space,
    task.flop / 1e9))
  local tab, path = phase1(task, "task " .. ti)
  tables[task] = tab
  complete[ti] = true
  for p = 1, tonumber(opts.passes) do
    if complete[ti] and (tab.pass_n[p] or 0) < #task.config_space then
      complete[ti] = false
      tab.incomplete = string.format("pass %d has %d of %d configs", p, tab.pass_n[p] or 0,
        #task.config_space)
    end
  end
  thr.n, thr.build, thr.run = thr.n + tab.batches.n, thr.build + tab.batches.build,
    thr.run + tab.batches.run
  tab.best, tab.errors = 0, 0
  for _, e in pairs(tab.costs) do
    tab.best = math.max(tab.best, flops_of(task, e))
    if e.error_no ~= 0 then tab.errors = tab.errors + 1 end
  end
  thr.errors = thr.errors + tab.errors
  local spreads = {}
  for _, e in pairs(tab.costs) do if e.spread then spreads[#spreads + 1] = e.spread end end
  io.write(string.format("  cost table %s: %d/%d configs measured, %d errors, best %.2f GFLOPS\n", path,
    tab.n, #task.config_space, tab.errors, tab.best / 1e9))
  if #spreads > 0 then
    table.sort(spreads)
    io.write(string.format("  pass-to-pass spread of a config's median (slowest/fastest pass) over %d " ..
      "configs: median %.1f%%, 90th percentile %.1f%%\n", #spreads, 100 * (spreads[math.ceil(#spreads / 2)] - 1),
      100 * (spreads[math.ceil(0.9 * #spreads)] - 1)))
  end
  for _, n in ipairs(tab.notes) do io.write("    measured: ", n, "\n") end
end

io.write("\nphase 1 measurement throughput (real LocalBuilder + LocalRunner, all batches in the cache)\n")
io.write(string.format("  number %s x repeat %s, builder n_parallel %s\n", opts.number, opts.repeats,
  opts.n_parallel))
io.write(string.format("  %-8s %8s %10s %14s %12s\n", "", "trials", "trials/s", "build s/trial",
  "run s/trial"))
for _, ti in ipairs(task_ids) do
  local b = tables[tasks[ti]].batches
  if b.n > 0 then
    io.write(string.format("  task %-3d %8d %10.2f %14.3f %12.3f\n", ti, b.n, b.n / (b.build + b.run),
      b.build / b.n, b.run / b.n))
  end
end
if thr.n > 0 then
  io.write(string.format("  %-8s %8d %10.2f %14.3f %12.3f  (build %.0f%% of the time)\n", "all", thr.n,
    thr.n / (thr.build + thr.run), thr.build / thr.n, thr.run / thr.n,
    100 * thr.build / (thr.build + thr.run)))
end
if tonumber(opts.measure_only) ~= 0 then return end

-- phase 2
local results = {}   -- results[task][tuner][checkpoint] = mean best GFLOPS
local replay_runner = ReplayRunner(tables)
local mo = autotvm.measure_option({ builder = ReplayBuilder(tonumber(opts.batch)), runner = replay_runner })
local t_all = now()
io.write(string.format("\nphase 2: REPLAY of the phase-1 costs (tuners, cost models and annealing run " ..
  "for real; each trial's timing is looked up), batch %s, %d seed(s)\n", opts.batch, seeds))
for _, ti in ipairs(task_ids) do
  local task = tasks[ti]
  if not complete[ti] then
    io.write(string.format("task %d: skipped: its cost table is incomplete (%s); run phase 1 first\n",
      ti, tables[task].incomplete))
  else
    results[ti] = {}
    for _, name in ipairs(tuners) do
      local sums = {}
      for _, c in ipairs(checkpoints) do sums[c] = 0 end
      for seed = 1, seeds do
        local t = tuner_mod.by_name(name, task, { seed = 1000 * seed + ti,
          plan_size = tonumber(opts.plan_size) > 0 and tonumber(opts.plan_size) or nil })
        local best, count, at, best_at, seq = 0, 0, {}, 0, 5381
        local t0 = now()
        t:tune({ n_trial = math.min(max_trial, #task.config_space), measure_option = mo,
                 callbacks = { function(_, inputs, res)
                   for k, r in ipairs(res) do
                     count = count + 1
                     local f = tuner_mod.result_flops(task, r)
                     if f > best then best, best_at = f, count end
                     at[count] = best
                     seq = bit.band(bit.bxor(seq * 33, tuner_mod.config_index(inputs[k].config)), 0x7fffffff)
                   end
                 end } })
        for _, c in ipairs(checkpoints) do
          sums[c] = sums[c] + (at[math.min(c, count)] or best) / 1e9
        end
        io.write(string.format("  task %d %-9s seed %d: %d trials, best %.2f GFLOPS at trial %d, " ..
          "%.1f s (trial order hash %08x)\n", ti, name, seed, count, best / 1e9, best_at, now() - t0, seq))
        io.flush()
      end
      results[ti][name] = {}
      for _, c in ipairs(checkpoints) do results[ti][name][c] = sums[c] / seeds end
    end
  end
end

-- ---- tables --------------------------------------------------------------------------------------
if next(results) == nil then return end
io.write(string.format("\nbest GFLOPS after N trials (mean of %d seeds; replayed phase-1 costs; N is capped " ..
  "at the space size)\n", seeds))
local head = string.format("%-6s %-9s", "task", "tuner")
for _, c in ipairs(checkpoints) do head = head .. string.format(" %8s", "N=" .. c) end
io.write(head, string.format(" %9s\n", "space best"))
for _, ti in ipairs(task_ids) do
  if results[ti] then
    for _, name in ipairs(tuners) do
      local line = string.format("%-6d %-9s", ti, name)
      for _, c in ipairs(checkpoints) do line = line .. string.format(" %8.2f", results[ti][name][c]) end
      io.write(line, string.format(" %9.2f\n", tables[tasks[ti]].best / 1e9))
    end
  end
end
io.write(string.format("phase 2 took %.1f s (%d replayed trials)\n", now() - t_all, replay_runner.replayed))

-- the target: xgb within 128 trials vs random's best at the last checkpoint
local has = {}
for _, n in ipairs(tuners) do has[n] = true end
local mid = checkpoints[math.min(2, #checkpoints)]
if has.xgb and has.random then
  io.write(string.format("\ntarget: xgb after %d trials >= 95%% of random after %d (means over seeds)\n", mid,
    max_trial))
  for _, ti in ipairs(task_ids) do
    if results[ti] then
      local x, r = results[ti].xgb[mid], results[ti].random[max_trial]
      io.write(string.format("  task %d: %.2f / %.2f = %.1f%% %s\n", ti, x, r, 100 * x / math.max(r, 1e-9),
        x >= 0.95 * r and "(>= 95%: ok)" or "(< 95%: MISSED)"))
    end
  end
end
