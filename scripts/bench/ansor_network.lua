--- Auto-scheduled networks end to end against the AutoTVM-tuned build and PyTorch, same run
--- (the tables of docs/performance.md "Auto-scheduled networks").
--
--   taskset -c 2,3 tunelua scripts/bench/ansor_network.lua --trials 300
--        -- host CPU, 2 threads: tune each network's NHWC tasks with the task scheduler (300
--        -- trials per network; the logs resume, so a re-run with --trials 600 adds 300), then
--        -- time the auto-scheduled network, the AutoTVM-tuned one and PyTorch's
--   tunelua scripts/bench/ansor_network.lua --log-dir logs --trials 0
--        -- no tuning: the logs already in logs/ (ansor_network.<network>[-<image size>].<kind>.json)
--   tunelua scripts/bench/ansor_network.lua --autotvm-log resnet18.log
--        -- the AutoTVM column with those records (default: TopHub's pre-tuned x86 records)
--   tunelua scripts/bench/ansor_network.lua --target opencl --trials 200
--        -- the OpenCL device 0: every network is tuned first (measurements run in child
--        -- processes; this process starts no kernel before tuning ends), then built and timed;
--        -- the peer is PyTorch on the first CUDA device (cuDNN, fp32, TF32 off; eager calls and
--        -- CUDA-graph replay)
--   tunelua scripts/bench/ansor_network.lua --target opencl --trials 0 --log-dir none
--        -- no log there: the default OpenCL schedules, NHWC against NCHW (generic defaults, the
--        -- Mali templates' fallback configs, TopHub's Mali records); the default NHWC build's
--        -- tiles are shaped for the device's kind (GPU or CPU device), the other kind's shapes
--        -- are a column beside it ("NHWC gpu shapes" on pocl, "NHWC cpu shapes" on a GPU)
--
-- Options: --networks LIST (resnet-18,mobilenet), --target T (llvm; "opencl" or any OpenCL
-- target string), --trials N (per network, default 0: the log as it is), --per-round N (64),
-- --population N (the evolutionary search's population; default TVM's 2048), --log-dir DIR
-- (.), --winograd MODE (auto, always or never: 3x3 stride-1 NHWC convs as Winograd tasks in the
-- auto-scheduled network, auto: where the x86 rule by shape says so on a CPU target; the
-- tuning and the build use the same mode, so a log tuned with one mode serves that mode),
-- --autotvm-log FILE, --threads N (2; the CPU peers too), --repeat N (30 timed runs of
-- each build), --rounds N (5: the builds of a network are timed interleaved, repeat/rounds
-- runs each per round, so that a load change hits every column alike), --image-size N,
-- --python PATH (/usr/bin/python3), --markdown FILE (the table, appended), --tune-seconds S
-- (tuning stops after about S seconds in all, shared evenly by the networks, or at --trials;
-- the table's "records" column says how many trials each network's log holds),
-- --min-task-trials N (64; 0: off) and --task-patience N (384; 0: off): see "tuning" below,
-- --cache-flush auto|yes|no (auto; CPU targets): yes: each trial as 10 single runs, the caches
-- flushed and the kernel's arguments but the first evicted before each (LocalRunner
-- enable_cpu_cache_flush, TVM's x86 tutorial's setting), instead of 3 runs of at least 50 ms
-- on warm caches; auto: so for the tasks whose weights take 8 MiB or more (flow.FLUSH_BYTES: in a
-- network they arrive from memory, and the kernels that stream them best are not those that
-- are fastest on warm caches; docs/auto_scheduler.md, "Cold weights"), warm for the others;
-- tune a log with one setting throughout (a task's costs of the two are not comparable),
-- --layout-rewrite yes|no|both (yes; CPU targets): trials and the auto-scheduled build store
-- each weight in the order its kernel's loops read it (docs/auto_scheduler.md, "Layout
-- rewriting"; the build does so for the records measured so); no: the weights as given in
-- both; both: tune as yes, and add a column "auto-sched, weights as given" (the build with no
-- rewrite: records measured with one run on the weights as given),
-- --tasks 0,2,5-7: tune only those tasks of each network (IDs from 0 in extract_tasks' order, as
-- tune_network_x86.lua prints them; e.g. to retune some tasks with --cache-flush yes into a log
-- of their own),
-- --profile N: after the table, each column's per-step profile (the least and the median of
-- N runs of each step, ms), the auto-scheduled one beside the AutoTVM one, with the sums of
-- the steps against the network's median.
--
-- On a many-core host, `TUNELUA_NUM_THREADS=2 TUNELUA_MEASURE_CPUS=2,3 tunelua
-- scripts/bench/ansor_network.lua ...` (no taskset) compiles and searches on every CPU, times
-- each trial on CPUs 2,3 and then pins itself there for the table. With several groups
-- (TUNELUA_MEASURE_CPUS=2,3;4,5;6,7) each round's trials are timed on all of them at once, one
-- measurement child per group, and the table on the first group (2,3); the warm-up rounds then
-- measure at least one trial per group (scripts/device/ansor_network_cpu.sh). --table no: tune
-- only (no build, no table).
--
-- Batch 1, fp32. Every figure is a median; ratios are the other build's time over the
-- auto-scheduled one's (> 1: auto-scheduled is faster); on OpenCL the default NHWC build is also
-- set against the NCHW ones.
local ffi = require "ffi"
local tl = require "tunelua"
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local auto_scheduler = require "tunelua.auto_scheduler"
local ameasure = require "tunelua.autotvm.measure"
local targets = require "tunelua.target"
local networks = require "networks"
local reference = require "networks.reference"
local file = require "tunelua.file"
local flow = require "tunelua.auto_scheduler.flow"
local stats = require "tunelua.stats"

local opts = { networks = "resnet-18,mobilenet", target = "llvm", trials = 0, per_round = 64, population = nil,
               log_dir = ".", autotvm_log = nil, threads = 2, ["repeat"] = 30, rounds = 5, image_size = nil,
               python = "/usr/bin/python3", markdown = nil, table = "yes", winograd = "auto",
               min_task_trials = 64, task_patience = 384, profile = nil, cache_flush = "auto",
               layout_rewrite = "yes" }
do
  local names = { ["--networks"] = "networks", ["--target"] = "target", ["--log-dir"] = "log_dir",
                  ["--autotvm-log"] = "autotvm_log", ["--python"] = "python", ["--markdown"] = "markdown",
                  ["--table"] = "table", ["--winograd"] = "winograd", ["--cache-flush"] = "cache_flush",
                  ["--layout-rewrite"] = "layout_rewrite", ["--tasks"] = "tasks" }
  local counts = { ["--trials"] = "trials", ["--per-round"] = "per_round", ["--population"] = "population",
                   ["--threads"] = "threads", ["--repeat"] = "repeat", ["--rounds"] = "rounds",
                   ["--image-size"] = "image_size", ["--tune-seconds"] = "tune_seconds",
                   ["--min-task-trials"] = "min_task_trials", ["--task-patience"] = "task_patience",
                   ["--profile"] = "profile" }
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    local key = names[a] or counts[a]
    if not key then error("ansor_network: unknown option " .. tostring(a) .. " (see the header of this script)", 0) end
    if v == nil then error("ansor_network: " .. a .. " expects a value", 0) end
    if counts[a] then
      local n = tonumber(v)
      local zero_ok = a == "--trials" or a == "--min-task-trials" or a == "--task-patience"
      if not n or n % 1 ~= 0 or n < (zero_ok and 0 or 1) then
        error(string.format("ansor_network: %s expects a %s integer, got %q", a,
                            zero_ok and "non-negative" or "positive", v), 0)
      end
      v = n
    end
    opts[key] = v
    i = i + 2
  end
end
if opts.layout_rewrite ~= "yes" and opts.layout_rewrite ~= "no" and opts.layout_rewrite ~= "both" then
  error("ansor_network: --layout-rewrite expects yes, no or both, got " .. tostring(opts.layout_rewrite), 0)
end
if opts.winograd ~= "auto" and opts.winograd ~= "always" and opts.winograd ~= "never" then
  error("ansor_network: --winograd expects auto, always or never, got " .. tostring(opts.winograd), 0)
end
-- --tasks: the IDs of the tasks to tune (from 0, as extract_tasks orders them; flow.parse_ids)
local only = opts.tasks and flow.parse_ids(opts.tasks) or nil
if opts.cache_flush ~= "auto" and opts.cache_flush ~= "yes" and opts.cache_flush ~= "no" then
  error(string.format("ansor_network: --cache-flush expects auto, yes or no, got %q", opts.cache_flush), 0)
end
if opts.table ~= "yes" and opts.table ~= "no" then
  error(string.format("ansor_network: --table expects yes or no, got %q", opts.table), 0)
end
-- the CPU groups the trials are timed on (checked before any tuning; one group or none: nil)
local pin = os.getenv("TUNELUA_MEASURE_CPUS")
if pin == "" then pin = nil end
local groups = pin and ameasure.parse_cpu_groups(pin) or nil
if groups and #groups > 1 and opts.per_round < #groups then
  print(string.format("ansor_network: --per-round %d < %d CPU groups: %d trials a round", opts.per_round, #groups,
                      #groups))
  opts.per_round = #groups
end
if opts.target == "opencl" then opts.target = "opencl -device=mali" end
local tgt = targets.parse(opts.target, 0)
local on_gpu = tgt.kind == "opencl"
if on_gpu and opts.cache_flush == "auto" then opts.cache_flush = "no" end
if on_gpu and opts.cache_flush == "yes" then
  error("ansor_network: --cache-flush is for CPU targets (the OpenCL device has no CPU cache to flush)", 0)
end
-- --cache-flush auto: the tasks with flow.FLUSH_BYTES (8 MiB) of weights or more are timed on flushed caches
local function cold(task)
  return opts.cache_flush == "yes" or (opts.cache_flush == "auto" and flow.flushed(task))
end
if not on_gpu then tl.set_num_threads(opts.threads) end
-- On several CPU groups the trials run on their groups with --threads threads (the
-- measurement children take TUNELUA_NUM_THREADS), while the search, the cost model's features
-- and the compiles between measurements use every core; the table is timed on --threads.
local search_threads = not on_gpu and groups and #groups > 1 and tl.num_cores() or nil
if search_threads then
  ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); ]]
  ffi.C.setenv("TUNELUA_NUM_THREADS", tostring(opts.threads), 1)
  tl.set_num_threads(search_threads)
end
if opts.autotvm_log and not file.exists(opts.autotvm_log) then
  error("ansor_network: --autotvm-log " .. opts.autotvm_log .. ": no such file", 0)
end

local function script_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/[^/]*$") or "."
end

local function log_of(name)
  return string.format("%s/ansor_network.%s%s.%s.json", opts.log_dir, name,
                       opts.image_size and ("-" .. opts.image_size) or "", tgt.kind)
end

local function count_lines(path)
  local f = io.open(path, "r")
  if not f then return 0 end
  local n = 0
  for _ in f:lines() do n = n + 1 end
  f:close()
  return n
end

local function get(name, layout)
  return networks.get_network(name, { batch_size = 1, layout = layout, image_size = opts.image_size })
end

-- ---- 1. tuning: every network before anything runs here ------------------------------------
local list = {}
for name in opts.networks:gmatch("[^,]+") do list[#list + 1] = name end
local hp
for _, name in ipairs(list) do
  local log = log_of(name)
  if opts.trials > 0 then
    file.mkdirs(opts.log_dir)
    local mod, params = get(name, "NHWC")
    local tasks, weights = auto_scheduler.extract_tasks(mod, params, opts.target,
                                                        { winograd = opts.winograd,
                                                          layout_rewrite = opts.layout_rewrite ~= "no" })
    if on_gpu and not hp then
      -- the device is asked in a child process (this one opens no OpenCL context before tuning ends)
      hp = auto_scheduler.hardware_params_of(opts.target, { device = targets.device_id(tgt) or 0 })
    end
    for _, t in ipairs(tasks) do if hp then rawset(t, "hardware_params", hp) end end
    if only then
      local keep_t, keep_w = {}, {}
      for _, id in ipairs(only) do
        if not tasks[id + 1] then
          error(string.format("ansor_network: --tasks %d: %s has tasks 0-%d", id, name, #tasks - 1), 0)
        end
        keep_t[#keep_t + 1], keep_w[#keep_w + 1] = tasks[id + 1], weights[id + 1]
      end
      tasks, weights = keep_t, keep_w
    end
    local n = math.max(opts.trials, #tasks)
    print(string.format("tuning %s: %d tasks, %d trials in all into %s (%d records there)", name, #tasks, n, log,
                        count_lines(log)))
    io.stdout:flush()
    -- with --tune-seconds, one task scheduler (resumed from the log) tunes in full rounds and
    -- starts no round once the network's share of the time is spent (TuningOptions.max_seconds);
    -- a task whose rounds measured nothing valid is retried (docs/auto_scheduler.md)
    -- A fresh log first gets a warm-up of small rounds (up to 4 trials a task), so that every
    -- task has a schedule before full rounds spend the time on a few.
    local t0 = os.time()
    local share = opts.tune_seconds and math.max(1, math.floor(opts.tune_seconds / #list)) or nil
    local tuner
    local runner, cold_names = flow.per_task_runner(tasks, cold,
      ameasure.LocalRunner({ number = 1, ["repeat"] = 10, min_repeat_ms = 0, timeout = 10, enable_cpu_cache_flush = true }),
      ameasure.LocalRunner({ number = 3, ["repeat"] = 1, min_repeat_ms = on_gpu and 20 or 50, timeout = 10 }))
    if #cold_names > 0 then
      print(string.format("  timed on flushed caches (--cache-flush %s): %s of %d tasks%s", opts.cache_flush,
                          #cold_names == #tasks and "all" or #cold_names, #tasks,
                          #cold_names < #tasks and ": " .. table.concat(cold_names, ", ") or ""))
    end
    local function tune(trials, per_round, seconds, extra)
      tuner = auto_scheduler.TaskScheduler(tasks, weights, { load_log_file = file.exists(log) and log or nil,
                                                             callbacks = {} })
      tuner:tune(auto_scheduler.TuningOptions{
        num_measure_trials = trials, num_measures_per_round = per_round, max_seconds = seconds,
        builder = ameasure.LocalBuilder({ timeout = 15 }),
        runner = runner,
        measure_callbacks = { auto_scheduler.RecordToFile(log) },
      }, { program_cost_model = "xgb", seed = 1, params = opts.population and {
        evolutionary_search_population = opts.population,
        sample_init_min_population = math.min(50, math.ceil(opts.population / 4)) } or nil }, extra)
    end
    -- (on several CPU groups a warm-up round measures at least one trial per group)
    local warm_round = math.min(opts.per_round, math.max(4, groups and #groups or 0))
    local warm = #tasks * warm_round
    if count_lines(log) < #tasks and n > warm then tune(warm, warm_round, share) end
    local left = share and share - (os.time() - t0)
    if count_lines(log) < n and (not left or left > 0) then
      tune(n, opts.per_round, left, { min_task_trials = opts.min_task_trials > 0 and opts.min_task_trials or nil,
                                      per_task_early_stopping = opts.task_patience > 0 and opts.task_patience or nil })
    end
    local est = tuner and tuner:estimated_latency()
    print(string.format("tuned %s: %d records, estimated %s ms, %d s", name, count_lines(log),
                        est and string.format("%.3f", est * 1e3) or "-", os.time() - t0))
  end
end

if opts.table == "no" then return end

-- ---- 2. build every column of a network, time them interleaved ----------------------------
-- With TUNELUA_MEASURE_CPUS (the CPUs the tuning's measurement children timed on; of several
-- groups the first) the builds and the PyTorch peer are timed there too: tuning compiles and
-- searches on the other CPUs.
if groups then tl.pin_cpus(groups[1]) end
if search_threads then tl.set_num_threads(opts.threads) end
local function build(mod, params, o)
  local bo = { target = opts.target, params = params, quiet = true }
  for k, v in pairs(o) do bo[k] = v end
  local lib = relay.build(mod, bo)
  local m = executor.GraphModule(lib)
  local shape = mod.main.params[1].type.shape
  m:set_input("data", tl.nd.random_uniform(shape, { low = 0, high = 1, seed = 1 }))
  m:run()
  return { m = m, lib = lib }
end

local function time_all(cols)
  local mods = {}
  for i, c in ipairs(cols) do mods[i] = c.b.m end
  local res, r = executor.benchmark_interleaved(mods, opts["repeat"], opts.rounds), {}
  for i, c in ipairs(cols) do r[c.name] = res[i].median * 1e3 end
  return r
end

-- the peer: PyTorch on the CPU (the thread count) or on CUDA; median (and graph) ms, version
local function peer(name)
  local cmd = string.format("%s %s/torch_peer.py --network %s --threads %d --repeat %d%s%s 2>&1", opts.python,
                            script_dir(), name, opts.threads, opts["repeat"], on_gpu and " --device cuda" or "",
                            opts.image_size and (" --image-size " .. opts.image_size) or "")
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  local med = out:match('"median_ms": ([%d%.e%-]+)')
  if not med then return nil, out:gsub("\n", " ") end
  return { ms = tonumber(med), graph = tonumber(out:match('"graph_ms": ([%d%.e%-]+)') or ""),
           version = out:match('"version": "([^"]+)"'), device = out:match('"device": "([^"]+)"') }
end

-- on OpenCL the default NHWC build takes the tiles of the device's kind (GPU or CPU shapes,
-- tunelua.graph.opencl.tile_shapes: auto, or TUNELUA_OPENCL_SHAPES); the other kind's is a
-- column too, so that both are timed in the same run
local shapes_auto, shapes_other
if on_gpu then
  shapes_auto = require("tunelua.graph.opencl").tile_shapes(tgt, {}).name
  shapes_other = shapes_auto == "gpu" and "cpu" or "gpu"
end
local heads = on_gpu and { "auto-sched", "default NHWC", "NHWC " .. (shapes_other or "") .. " shapes", "default NCHW",
                           "Mali fallback", "Mali TopHub" }
                      or { "auto-sched", "AutoTVM" }
local NO_REWRITE = "auto-sched, weights as given"
if not on_gpu and opts.layout_rewrite == "both" then table.insert(heads, 2, NO_REWRITE) end
local rows = {}
for _, name in ipairs(list) do
  local log = log_of(name)
  local nmod, nparams = get(name, "NHWC")
  local cmod, cparams = get(name, "NCHW")
  local cols = {}
  local records = count_lines(log)
  if records > 0 then
    cols[#cols + 1] = { name = "auto-sched", b = build(nmod, nparams, { history = auto_scheduler.ApplyHistoryBest(log),
                                                                  winograd = opts.winograd,
                                                                  layout_rewrite = opts.layout_rewrite ~= "no" }) }
    if not on_gpu and opts.layout_rewrite == "both" then
      cols[#cols + 1] = { name = NO_REWRITE, b = build(nmod, nparams, { history = auto_scheduler.ApplyHistoryBest(log),
                                                                        winograd = opts.winograd, layout_rewrite = false }) }
    end
  end
  if on_gpu then
    cols[#cols + 1] = { name = "default NHWC", b = build(nmod, nparams, { history = auto_scheduler.ApplyHistoryBest({}),
                                                                          winograd = opts.winograd }) }
    cols[#cols + 1] = { name = "NHWC " .. shapes_other .. " shapes",
                        b = build(nmod, nparams, { history = auto_scheduler.ApplyHistoryBest({}), opencl_shapes = shapes_other }) }
    cols[#cols + 1] = { name = "default NCHW", b = build(cmod, cparams, { history = auto_scheduler.ApplyHistoryBest({}) }) }
    cols[#cols + 1] = { name = "Mali fallback", b = build(cmod, cparams, { tophub = false }) }
    cols[#cols + 1] = { name = "Mali TopHub", b = build(cmod, cparams, { tophub = true }) }
  else
    local hist = opts.autotvm_log and autotvm.apply_history_best(opts.autotvm_log) or nil
    cols[#cols + 1] = { name = "AutoTVM", b = build(cmod, cparams, { history = hist, tophub = true }) }
  end
  -- the auto-scheduled network must compute what the reference interpreter computes on the
  -- same input; a build that does not is reported and not timed. The check builds it again
  -- with weights that keep the activations at unit scale ("he"): with the default ("xavier")
  -- ones the logits of a deep network are nearly equal and its softmax a flat 1/classes.
  if cols[1] and cols[1].name == "auto-sched" then
    local hmod, hparams = networks.get_network(name, { batch_size = 1, layout = "NHWC", image_size = opts.image_size,
                                                       init = "he", seed = 7 })
    local hb = build(hmod, hparams, { history = auto_scheduler.ApplyHistoryBest(log), winograd = opts.winograd,
                                      layout_rewrite = opts.layout_rewrite ~= "no" })
    local shape = hmod.main.params[1].type.shape
    local ref = reference.run(hmod, hparams, { data = tl.nd.random_uniform(shape, { low = 0, high = 1, seed = 1 }) })
    local dmin, dmax = math.huge, -math.huge
    for _, v in ipairs(ref[1]:flat()) do dmin, dmax = math.min(dmin, v), math.max(dmax, v) end
    assert(dmax > 2 * dmin, name .. ": the reference output is flat; the check would prove nothing")
    local ok, msg, st = reference.compare(hb.m:get_output(0), ref[1], { rtol = 1e-3 })
    if ok then
      print(string.format("%s: the auto-scheduled output matches the reference interpreter (max |diff| %.2e, " ..
                          "%.2e of the largest value)", name, st.max_abs, st.rel_norm))
    else
      io.stderr:write(string.format("ansor_network: %s: the auto-scheduled output differs from the reference " ..
                                    "interpreter: %s; its column is left out\n", name, msg))
      table.remove(cols, 1)
    end
  end
  local t = time_all(cols)
  local pr, why = peer(name)
  if not pr then io.stderr:write("ansor_network: PyTorch peer: ", tostring(why), "\n") end
  rows[#rows + 1] = { name = name, t = t, peer = pr, records = records }
  if opts.profile then
    -- per step: the least and the median of --profile runs (the steps of one network run back
    -- to back); a step whose median is far above its least is one that the load disturbs
    local profs = {}
    for k, c in ipairs(cols) do
      local runs = {}
      for r = 1, opts.profile do runs[r] = c.b.m:profile(1) end
      local lo = {}
      for i, st in ipairs(runs[1]) do
        local v = {}
        for r = 1, #runs do v[r] = runs[r][i].seconds end
        lo[i] = { name = st.name, s = math.min(unpack(v)), med = stats.median(v) }
      end
      profs[k] = lo
    end
    print(string.format("\n%s per step (ms: the least / the median of %d runs):", name, opts.profile))
    local heads_p = {}
    for k, c in ipairs(cols) do heads_p[k] = c.name end
    print("| step | " .. table.concat(heads_p, " | ") .. " |")
    local nmax = 0
    for _, p in ipairs(profs) do nmax = math.max(nmax, #p) end
    for i = 1, nmax do
      local line = { tostring(i - 1) }
      for k = 1, #cols do
        local st = profs[k][i]
        line[#line + 1] = st and string.format("%.3f / %.3f %s", st.s * 1e3, st.med * 1e3, st.name) or ""
      end
      print("| " .. table.concat(line, " | ") .. " |")
    end
    local sums = {}
    for k, c in ipairs(cols) do
      local sum, summed = 0, 0
      for _, st in ipairs(profs[k]) do sum, summed = sum + st.s, summed + st.med end
      sums[k] = string.format("%s %.3f / %.3f (the network's median %.3f)", c.name, sum * 1e3, summed * 1e3,
                              t[c.name] or 0 / 0)
    end
    print("sum of the steps: " .. table.concat(sums, ", "))
  end
end

-- ---- 3. the table -----------------------------------------------------------------------
local function f2(x) return x and string.format("%.2f", x) or "n/a" end
local function ratio(a, b) return (a and b) and string.format("%.2f", a / b) or "n/a" end
local out = {}
local function emit(s) print(s); out[#out + 1] = s end
local peer_heads = on_gpu and { "PyTorch eager", "PyTorch graph" } or { "PyTorch" }
local ratio_heads = on_gpu and { "PyTorch graph / auto", "default NHWC / default NCHW", "default NHWC / Mali TopHub" }
                             or { "AutoTVM / auto", "PyTorch / auto" }
emit("")
emit(string.format("%s, batch 1, fp32%s%s; median of %d runs (ms), interleaved in %d rounds", opts.target,
                   on_gpu and "" or string.format(", %d threads", opts.threads),
                   opts.image_size and string.format(", %dx%d input", opts.image_size, opts.image_size) or "",
                   opts["repeat"], opts.rounds))
local hdr = { "network", "records" }
for _, h in ipairs(heads) do hdr[#hdr + 1] = h end
for _, h in ipairs(peer_heads) do hdr[#hdr + 1] = h end
for _, h in ipairs(ratio_heads) do hdr[#hdr + 1] = h end
emit("| " .. table.concat(hdr, " | ") .. " |")
emit("|" .. string.rep("---|", #hdr))
for _, r in ipairs(rows) do
  local line = { r.name, tostring(r.records) }
  for _, h in ipairs(heads) do line[#line + 1] = f2(r.t[h]) end
  local auto = r.t["auto-sched"]
  if on_gpu then
    line[#line + 1] = f2(r.peer and r.peer.ms)
    line[#line + 1] = f2(r.peer and r.peer.graph)
    line[#line + 1] = ratio(r.peer and r.peer.graph, auto)
    line[#line + 1] = ratio(r.t["default NHWC"], r.t["default NCHW"])
    line[#line + 1] = ratio(r.t["default NHWC"], r.t["Mali TopHub"])
  else
    line[#line + 1] = f2(r.peer and r.peer.ms)
    line[#line + 1] = ratio(r.t["AutoTVM"], auto)
    line[#line + 1] = ratio(r.peer and r.peer.ms, auto)
  end
  emit("| " .. table.concat(line, " | ") .. " |")
end
local pv
for _, r in ipairs(rows) do if r.peer then pv = r.peer; break end end
emit(string.format("auto-sched: NHWC, the best record of each task in %s (records = trials measured); %s; PyTorch %s%s",
                   log_of("<network>"),
                   on_gpu and "default: the default OpenCL schedules; Mali: the NCHW templates" or
                   ("AutoTVM: NCHW, " .. (opts.autotvm_log and ("records of " .. opts.autotvm_log .. " over TopHub's")
                                          or "TopHub's pre-tuned x86 records")),
                   pv and pv.version or "n/a", pv and pv.device and (" on " .. pv.device ..
                   " (cuDNN, fp32, TF32 off; graph: CUDA-graph replay)") or ""))
if opts.markdown then file.append_lines(opts.markdown, out) end
