-- search_efficiency.lua: how fast each template tuner finds fast configs (issue 6).
--
--   tunelua scripts/bench/search_efficiency.lua            -- the full run (hours)
--   tunelua scripts/bench/search_efficiency.lua --quick    -- a smoke run (1 task, xgb and random, 8 trials: under a minute)
--   options: --tuners xgb,random  --seeds 3  --checkpoints 64,128,256,512  --tasks 1,2,3
--            --n_parallel N (builder; default: cores)  --number 4 --repeats 3
--
-- For 3 conv2d tasks of resnet-18 (NCHW, batch 1, host CPU, conv2d_NCHWc.x86) and the tuners
-- xgb, xgb_rank, ga and random, prints the best GFLOPS found after each checkpoint number of
-- trials, averaged over the seeds, then measurement throughput (trials per second, with the
-- wall time split between building and running). The target: xgb reaches >= 95% of the best
-- that random finds in 512 trials within 128 trials (the last table says it per task).
local autotvm = require "tunelua.autotvm"
local tuner_mod = require "tunelua.autotvm.tuner"
local core = require "tunelua.core"

local now = function() return core.C.tl_now() end

-- ---- options ------------------------------------------------------------------------------
local opts = { tuners = "xgb,xgb_rank,ga,random", seeds = 3, checkpoints = "64,128,256,512",
               tasks = "1,2,3", n_parallel = core.C.tl_num_cores(), number = 4, repeats = 3 }
local argv = arg or {}
local i = 1
while i <= #argv do
  local a = argv[i]
  if a == "--quick" then
    opts.quick = true
  elseif a:match("^%-%-") then
    local k = a:sub(3)
    if opts[k] == nil then error("search_efficiency: unknown option " .. a, 0) end
    opts[k] = argv[i + 1]
    i = i + 1
  end
  i = i + 1
end
if opts.quick then
  opts.tuners, opts.seeds, opts.checkpoints, opts.tasks = "xgb,random", 1, "4,8", "3"
  opts.number, opts.repeats = 1, 1
end
local function list(s, num)
  local out = {}
  for x in tostring(s):gmatch("[^,]+") do out[#out + 1] = num and tonumber(x) or x end
  return out
end
local tuners, checkpoints, task_ids = list(opts.tuners), list(opts.checkpoints, true), list(opts.tasks, true)
local seeds = tonumber(opts.seeds)
local max_trial = checkpoints[#checkpoints]

-- ---- the tasks: resnet-18's 3x3 convolutions of stages 2, 3 and 4 (NCHW, batch 1) ----------
local function conv(c, hw, k, stride)
  return { { "TENSOR", { 1, c, hw, hw }, "float32" }, { "TENSOR", { k, c, 3, 3 }, "float32" },
           { stride, stride }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
end
local ALL = {
  { "conv 64x56x56 -> 64, 3x3", conv(64, 56, 64, 1) },
  { "conv 128x28x28 -> 128, 3x3", conv(128, 28, 128, 1) },
  { "conv 256x14x14 -> 256, 3x3", conv(256, 14, 256, 1) },
}

-- ---- measurement with the build/run split --------------------------------------------------
local stats = { build = 0, run = 0, trials = 0, errors = 0 }
local function option()
  local mo = autotvm.measure_option({
    builder = autotvm.LocalBuilder({ n_parallel = tonumber(opts.n_parallel), timeout = 30 }),
    runner = autotvm.LocalRunner({ number = tonumber(opts.number), repeats = tonumber(opts.repeats),
                                   timeout = 10, cooldown_interval = 0 }),
  })
  local build, run = mo.builder.build, mo.runner.run
  mo.builder.build = function(self, inputs)
    local t0 = now()
    local r = build(self, inputs)
    stats.build = stats.build + now() - t0
    return r
  end
  mo.runner.run = function(self, inputs, brs)
    local t0 = now()
    local r = run(self, inputs, brs)
    stats.run = stats.run + now() - t0
    stats.trials = stats.trials + #inputs
    for _, x in ipairs(r) do if x.error_no ~= 0 then stats.errors = stats.errors + 1 end end
    return r
  end
  return mo
end
local mo = option()

-- ---- the runs ----------------------------------------------------------------------------------
local results = {}   -- results[task][tuner][checkpoint] = mean best GFLOPS
local t_all = now()
for _, ti in ipairs(task_ids) do
  local desc, args = ALL[ti][1], ALL[ti][2]
  local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
  io.write(string.format("task %d: %s, %d configs, %.3f GFLOP\n", ti, desc, #task.config_space,
    task.flop / 1e9))
  results[ti] = {}
  for _, name in ipairs(tuners) do
    local sums = {}
    for _, c in ipairs(checkpoints) do sums[c] = 0 end
    for seed = 1, seeds do
      local t = tuner_mod.by_name(name, task, { seed = 1000 * seed + ti })
      local best, count, at = 0, 0, {}
      local t0 = now()
      t:tune({ n_trial = math.min(max_trial, #task.config_space), measure_option = mo,
               callbacks = { function(tu, inputs)
                 for _ = 1, #inputs do
                   count = count + 1
                   best = tu.best_flops
                   at[count] = best
                 end
               end } })
      for _, c in ipairs(checkpoints) do
        sums[c] = sums[c] + (at[math.min(c, count)] or best) / 1e9
      end
      io.write(string.format("  %-10s seed %d: %d trials, best %.2f GFLOPS, %.1f s\n", name, seed,
        count, best / 1e9, now() - t0))
      io.flush()
    end
    results[ti][name] = {}
    for _, c in ipairs(checkpoints) do results[ti][name][c] = sums[c] / seeds end
  end
end

-- ---- tables ------------------------------------------------------------------------------------
io.write(string.format("\nbest GFLOPS after N trials (mean of %d seeds)\n", seeds))
local head = string.format("%-6s %-10s", "task", "tuner")
for _, c in ipairs(checkpoints) do head = head .. string.format(" %8s", "N=" .. c) end
io.write(head, "\n")
for _, ti in ipairs(task_ids) do
  for _, name in ipairs(tuners) do
    local line = string.format("%-6d %-10s", ti, name)
    for _, c in ipairs(checkpoints) do line = line .. string.format(" %8.2f", results[ti][name][c]) end
    io.write(line, "\n")
  end
end

local total = now() - t_all
io.write(string.format("\nmeasurement: %d trials (%d errors) in %.1f s = %.2f trials/s; build %.1f s " ..
  "(%.0f%%), run %.1f s (%.0f%%), tuner + other %.1f s\n", stats.trials, stats.errors, total,
  stats.trials / math.max(total, 1e-9), stats.build, 100 * stats.build / math.max(total, 1e-9),
  stats.run, 100 * stats.run / math.max(total, 1e-9), total - stats.build - stats.run))

-- the target: xgb within 128 trials vs random's best at the last checkpoint
local has = {}
for _, n in ipairs(tuners) do has[n] = true end
local mid = checkpoints[math.min(2, #checkpoints)]
if has.xgb and has.random then
  io.write(string.format("\nxgb after %d trials vs random after %d:\n", mid, max_trial))
  for _, ti in ipairs(task_ids) do
    local x, r = results[ti].xgb[mid], results[ti].random[max_trial]
    io.write(string.format("  task %d: %.2f / %.2f = %.0f%% %s\n", ti, x, r, 100 * x / math.max(r, 1e-9),
      x >= 0.95 * r and "(>= 95%: ok)" or "(< 95%)"))
  end
end
