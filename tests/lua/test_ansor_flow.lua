-- The auto-scheduler's network flow (tunelua.auto_scheduler.flow, scripts/tune_network_*.lua):
-- option parsing, the seed's settings, the default log name, and bad options named.
local flow = require "tunelua.auto_scheduler.flow"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

local o = flow.parse_args({}, { target = "opencl -device=mali" })
eq(o.network, "mobilenet", "default network")
eq(o.layout, "NHWC", "default layout")
eq(o.log, "mobilenet-NHWC-B1-opencl.json", "the seed's log name")
eq(o.n_trial, nil, "default trials: 2 per task, decided once the tasks are known")
eq(o.resume, false, "no resume by default")

o = flow.parse_args({ "--network", "resnet-18", "--layout", "NCHW", "--n-trial", "64", "--per-round", "8",
                      "--resume", "--tracker", "127.0.0.1:9190", "--key", "k", "--strategy", "round-robin",
                      "--model", "random", "--log", "x.json" }, { target = "llvm" })
eq(o.network, "resnet-18", "--network")
eq(o.layout, "NCHW", "--layout")
eq(o.n_trial, 64, "--n-trial")
eq(o.per_round, 8, "--per-round")
eq(o.resume, true, "--resume")
eq(o.tracker, "127.0.0.1:9190", "--tracker")
eq(o.strategy, "round-robin", "--strategy")
eq(o.model, "random", "--model")
eq(o.log, "x.json", "--log")

-- the seed's settings, with an explicit option still winning
o = flow.parse_args({ "--seed-settings", "--n-trial", "50" }, { target = "llvm" })
eq(o.n_trial, 50, "an explicit option wins over --seed-settings")
eq(o.runner_repeat, 3, "the seed's RPCRunner repeat")
eq(o.timeout, 50, "the seed's RPCRunner timeout")
eq(o.min_repeat_ms_e2e, 500, "the seed's min_repeat_ms")

-- --tasks (IDs as extract_tasks numbers them) and --population
o = flow.parse_args({ "--tasks", "5-7,0, 2,6", "--population", "64" }, { target = "llvm" })
eq(table.concat(o.task_ids, ","), "0,2,5,6,7", "--tasks: sorted, ranges expanded, duplicates once")
eq(o.population, 64, "--population")
eq(flow.parse_args({}, { target = "llvm" }).task_ids, nil, "every task by default")

-- --cache-flush: single runs on flushed caches for every task (CPU targets only); by default on
-- CPU targets only the tasks with 8 MiB of weights or more (flow.flushed), none elsewhere;
-- --warm-caches: none
o = flow.parse_args({ "--cache-flush" }, { target = "llvm" })
eq(o.cache_flush, "yes", "--cache-flush")
eq(o.number, 1, "--cache-flush: one run per measurement")
eq(o.runner_repeat, 10, "--cache-flush: 10 measurements")
eq(o.min_repeat_ms, 0, "--cache-flush: no minimum duration")
o = flow.parse_args({}, { target = "llvm" })
eq(o.cache_flush, "auto", "the large tasks on flushed caches by default")
eq(o.number, 3, "default: the warm tasks' runs per measurement")
eq(o.min_repeat_ms, 100, "default: the warm tasks' minimum duration")
eq(flow.parse_args({ "--warm-caches" }, { target = "llvm" }).cache_flush, "no", "--warm-caches")
eq(flow.parse_args({}, { target = "opencl -device=mali" }).cache_flush, "no", "no cache flush on OpenCL")
eq(flow.FLUSH_BYTES, 8 * 2 ^ 20, "the default's threshold")
eq(flow.flushed({ constant_bytes = function() return 8 * 2 ^ 20 end }), true, "8 MiB of weights: flushed")
eq(flow.flushed({ constant_bytes = function() return 8 * 2 ^ 20 - 1 end }), false, "less: warm")
local okf, errf = pcall(flow.parse_args, { "--cache-flush" }, { target = "opencl -device=mali" })
assert(not okf and tostring(errf):find("--cache-flush: for CPU targets (llvm); the target is opencl", 1, true),
       tostring(errf))

local bad = {
  { { "--tasks", "1,x" }, '--tasks: expected task IDs like 0,2,5-7, got "1,x"' },
  { { "--tasks", "4-2" }, '--tasks: expected task IDs like 0,2,5-7, got "4-2"' },
  { { "--tasks", "" }, '--tasks: expected task IDs like 0,2,5-7, got ""' },
  { { "--population", "0" }, '--population: expected a positive integer, got "0"' },
  { { "--layout", "NCWH" }, "--layout: expected NHWC or NCHW, got NCWH" },
  { { "--n-trial", "0" }, '--n-trial: expected a positive integer, got "0"' },
  { { "--n-trial" }, "--n-trial: expected a value" },
  { { "--strategy", "greedy" }, "--strategy: expected gradient or round-robin, got greedy" },
  { { "--model", "mlp" }, "--model: expected xgb or random, got mlp" },
  { { "--tracker", "nohost" }, "--tracker: expected HOST:PORT, got nohost" },
  { { "--frobnicate" }, 'unknown option "--frobnicate" (see --help)' },
  { { "--target", "cuda" }, "--target: unknown target 'cuda'" },
}
for _, b in ipairs(bad) do
  local ok, err = pcall(flow.parse_args, b[1], { target = "llvm" })
  assert(not ok and tostring(err):find(b[2], 1, true), table.concat(b[1], " ") .. " -> " .. tostring(err))
end
print("ok")
