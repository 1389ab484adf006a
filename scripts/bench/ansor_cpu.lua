-- Benchmark: the auto-scheduler's search on resnet-18's conv2d tasks (NHWC, batch 1, fp32)
-- and a 1024^3 matmul on this host's CPU ("llvm"). Per task: the time of one search round
-- (population P, 4 generations: sampling, mutation, selection; the features and the cost
-- model's prediction when --model xgb is available), and the best kernel after N measured
-- trials, in GFLOPS.
--
--   tunelua scripts/bench/ansor_cpu.lua [N=64] [P=2048] [--tasks=k] [--target=llvm]
--
-- scripts/bench/ansor_gpu.lua runs the same on an OpenCL device (the accelerator machine).
local auto_scheduler = require "tunelua.auto_scheduler"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local networks = require "networks"

local N, P, NT, TGT = 64, 2048, nil, "llvm"
local pos = {}
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-(%w+)=(.*)$")
  if k == "tasks" then NT = tonumber(v)
  elseif k == "target" then TGT = v
  else pos[#pos + 1] = a end
end
N = tonumber(pos[1]) or N
P = tonumber(pos[2]) or P

local tasks = {}
local mod, params = networks.get_network("resnet-18", { layout = "NHWC", batch_size = 1 })
for _, t in ipairs(auto_scheduler.extract_tasks(mod, params, TGT)) do
  if t.desc[1]:find("conv2d") then tasks[#tasks + 1] = { name = t.desc[1], task = t } end
end
if NT then while #tasks > NT do table.remove(tasks) end end
local A = te.placeholder({ 1024, 1024 }, "float32", "A")
local B = te.placeholder({ 1024, 1024 }, "float32", "B")
tasks[#tasks + 1] = { name = "matmul 1024^3",
  task = auto_scheduler.SearchTask{ compute_dag = topi.matmul(A, B), target = TGT } }

print(string.format("auto-scheduler search, target %s, %d trials per task, population %d", TGT, N, P))
print(string.format("%-4s %-44s %12s %10s %12s %10s", "task", "name", "GFLOP", "round s", "best ms", "GFLOPS"))
local dir = require("tunelua.file").tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-ansor")
local rounds, gm, ng = {}, 0, 0
for i, e in ipairs(tasks) do
  local t = e.task
  local policy = auto_scheduler.SketchPolicy(t, { seed = i, program_cost_model = auto_scheduler.RandomModel(),
    params = { evolutionary_search_population = P } })
  local _, secs = policy:next_batch(1)   -- one round at the full population: the search cost
  local r = t:tune(auto_scheduler.TuningOptions{ num_measure_trials = N, num_measures_per_round = math.min(64, N),
    verbose = 0, measure_callbacks = { auto_scheduler.RecordToFile(dir .. "/log.json") } },
    auto_scheduler.SketchPolicy(t, { seed = i, program_cost_model = auto_scheduler.RandomModel(),
                                     params = { evolutionary_search_population = P } }))
  local gf = r.best_cost < math.huge and t.flop / r.best_cost / 1e9 or 0
  rounds[#rounds + 1] = secs
  if gf > 0 then gm, ng = gm + math.log(gf), ng + 1 end
  print(string.format("%-4d %-44s %12.3f %10.2f %12.4f %10.2f", i, e.name, t.flop / 1e9, secs,
                      r.best_cost * 1e3, gf))
end
table.sort(rounds)
print(string.format("search round (median over tasks): %.2f s; geometric mean %.2f GFLOPS",
                    rounds[math.ceil(#rounds / 2)], ng > 0 and math.exp(gm / ng) or 0))
require("tunelua.file").remove(dir)
