--- tunelua.auto_scheduler.flow: seed 003's whole-network auto-scheduling flow, shared by
--- scripts/tune_network_mali.lua and scripts/tune_network_x86.lua.
--
--   require("tunelua.auto_scheduler.flow").main(arg, {target = "llvm"}, "scripts/tune_network_x86.lua")
--
-- Extract the network's search tasks (with the hardware params of the device: a local OpenCL
-- device is queried, a CPU target reads this host), let the task scheduler share the trial
-- budget between them (every measurement appended to the log), compile the network with the
-- best record of each task (ApplyHistoryBest) and print its mean inference time. --resume
-- (or re-running with the same --log) continues from the log. With --tracker, trials are
-- measured on a device of the tracker (RPCRunner) and the compiled network runs there.
local flow = {}

flow.defaults = {
  network = "mobilenet", layout = "NHWC", target = "llvm", batch_size = 1, dtype = "float32",
  n_trial = nil,            -- nil: 2 trials per task (a short demonstration run)
  per_round = 64,           -- num_measures_per_round (at most n_trial / tasks)
  log = nil, resume = false, tracker = nil, key = "rk3399", image_size = nil,
  strategy = "gradient", model = "xgb", seed = 1, winograd = "auto",
  number = 3, runner_repeat = 1, min_repeat_ms = 100, timeout = 10,
  cache_flush = "auto",     -- "auto": flushed caches for tasks of 8 MiB of weights or more; "yes", "no"
  ["repeat"] = 3, bench_number = 10,
  -- --seed-settings: the seed's own (num_measure_trials = 200; RPCRunner repeat = 3,
  -- timeout = 50; the end-to-end time_evaluator repeat = 3, min_repeat_ms = 500)
  seed_settings = { n_trial = 200, runner_repeat = 3, timeout = 50, ["repeat"] = 3, bench_number = nil,
                    min_repeat_ms_e2e = 500 },
}

flow.usage = [[
usage: tunelua %s [options]
  --network NAME      mobilenet, resnet-18, resnet-50, vgg-16, squeezenet_v1.1, inception_v3
                      (default %s)
  --layout L          NHWC (the auto-scheduler's choice) or NCHW (default %s)
  --target TARGET     default "%s"
  --n-trial N         trials for the whole network (default: 2 per task)
  --per-round N       trials per task scheduler round (default %d; at most n-trial / tasks)
  --strategy S        gradient or round-robin (default %s)
  --model M           xgb or random: the search's cost model (default %s)
  --log FILE          the log (default <network>-<layout>-B<batch>-<target kind>.json)
  --resume            continue from the log (re-running with the same log does it too)
  --tracker HOST:PORT measure on devices of an RPC tracker, run the network there
  --key KEY           device key at the tracker (default %s)
  --image-size N      input height and width (default: the network's)
  --population N      the evolutionary search's population (default 2048, TVM's); a small one
                      (e.g. 64) makes each round's search fast and the schedules less tuned
  --tasks LIST        tune only these task IDs (e.g. 0,2,5-7); the network's other groups
                      are compiled with the default schedules (default: every task)
  --repeat N          end-to-end measurements (default %d)
  --winograd MODE     auto, always or never: 3x3 stride-1 NHWC convs as Winograd tasks (auto:
                      on CPU targets where the x86 rule by shape says it wins; default auto)
  --seed-settings     the seed's settings: 200 trials, RPCRunner repeat 3 and timeout 50, the
                      end-to-end time of repeat 3 x at least 500 ms (options given still win)
  --cache-flush       CPU targets: time each trial of every task as 10 single runs with the
                      CPU caches flushed and the weights evicted before each (as a layer reads
                      its weights inside a network) instead of runs of at least 100 ms on warm
                      caches; keep one setting per log. Default (CPU targets): so for the tasks
                      with 8 MiB of weights or more, warm for the others
  --warm-caches       CPU targets: every task's trials on warm caches
]]

function flow.parse_args(argv, defaults, script)
  local o = {}
  for k, v in pairs(flow.defaults) do o[k] = v end
  for k, v in pairs(defaults or {}) do o[k] = v end
  local strings = { ["--network"] = "network", ["--layout"] = "layout", ["--target"] = "target",
    ["--log"] = "log", ["--tracker"] = "tracker", ["--key"] = "key", ["--strategy"] = "strategy",
    ["--model"] = "model", ["--tasks"] = "tasks", ["--winograd"] = "winograd" }
  local counts = { ["--n-trial"] = "n_trial", ["--per-round"] = "per_round", ["--image-size"] = "image_size",
    ["--repeat"] = "repeat", ["--population"] = "population" }
  local given, seed = {}, false
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if strings[a] or counts[a] then
      local v = argv[i + 1]
      if v == nil then error(a .. ": expected a value", 0) end
      if counts[a] then
        local n = tonumber(v)
        if not n or n < 1 or n % 1 ~= 0 then error(string.format("%s: expected a positive integer, got %q", a, v), 0) end
        v = n
      end
      o[strings[a] or counts[a]] = v
      given[strings[a] or counts[a]] = true
      i = i + 2
    elseif a == "--resume" then o.resume = true; i = i + 1
    elseif a == "--seed-settings" then seed = true; i = i + 1
    elseif a == "--cache-flush" then o.cache_flush = "yes"; i = i + 1
    elseif a == "--warm-caches" then o.cache_flush = "no"; i = i + 1
    elseif a == "-h" or a == "--help" then
      io.write(string.format(flow.usage, script or "script.lua", o.network, o.layout, o.target, o.per_round,
        o.strategy, o.model, o.key, o["repeat"]))
      os.exit(0)
    else
      error(string.format("unknown option %q (see --help)", a), 0)
    end
  end
  if seed then
    for k, v in pairs(o.seed_settings) do if not given[k] then o[k] = v end end
  end
  if o.layout ~= "NHWC" and o.layout ~= "NCHW" then error("--layout: expected NHWC or NCHW, got " .. o.layout, 0) end
  if o.strategy ~= "gradient" and o.strategy ~= "round-robin" then
    error("--strategy: expected gradient or round-robin, got " .. o.strategy, 0)
  end
  if o.model ~= "xgb" and o.model ~= "random" then error("--model: expected xgb or random, got " .. o.model, 0) end
  if o.winograd ~= "auto" and o.winograd ~= "always" and o.winograd ~= "never" then
    error("--winograd: expected auto, always or never, got " .. o.winograd, 0)
  end
  if o.tracker and not o.tracker:match("^[^:]+:%d+$") then error("--tracker: expected HOST:PORT, got " .. o.tracker, 0) end
  if o.tasks then o.task_ids = flow.parse_ids(o.tasks) end
  local tgt, why = require("tunelua.target").try_parse(o.target)
  if not tgt then error("--target: " .. why, 0) end
  if o.cache_flush == "yes" then
    if tgt.kind ~= "llvm" then
      error("--cache-flush: for CPU targets (llvm); the target is " .. tgt.kind, 0)
    end
    o.number, o.min_repeat_ms, o.runner_repeat = 1, 0, math.max(o.runner_repeat, 10)
  elseif o.cache_flush == "auto" and tgt.kind ~= "llvm" then
    o.cache_flush = "no"
  end
  o.log = o.log or string.format("%s-%s-B%d-%s.json", o.network, o.layout, o.batch_size, tgt.kind)
  return o
end

--- The weights from which a task's trials are timed on flushed caches by default (CPU targets;
--- docs/auto_scheduler.md, "Cold weights"), and whether a task has that much.
flow.FLUSH_BYTES = 8 * 2 ^ 20
function flow.flushed(task) return task:constant_bytes() >= flow.FLUSH_BYTES end

--- per_task_runner(tasks, cold, flush_runner, warm_runner) -> runner, names: TuningOptions'
--- runner that measures the tasks for which cold(task) holds with flush_runner and the others
--- with warm_runner (warm_runner itself when none is cold), and the cold tasks as "name (N MiB)"
function flow.per_task_runner(tasks, cold, flush_runner, warm_runner)
  local names = {}
  for _, task in ipairs(tasks) do
    if cold(task) then names[#names + 1] = string.format("%s (%.1f MiB)", task.desc[1], task:constant_bytes() / 2 ^ 20) end
  end
  if #names == 0 then return warm_runner, names end
  return function(task) return cold(task) and flush_runner or warm_runner end, names
end

--- parse_ids("0,2,5-7") -> {0, 2, 5, 6, 7} (task IDs as extract_tasks prints them, from 0)
function flow.parse_ids(text)
  local ids, seen = {}, {}
  for part in (text .. ","):gmatch("([^,]*),") do
    local a, b = part:match("^%s*(%d+)%s*%-%s*(%d+)%s*$")
    if not a then a = part:match("^%s*(%d+)%s*$"); b = a end
    if not a or tonumber(b) < tonumber(a) then
      error(string.format("--tasks: expected task IDs like 0,2,5-7, got %q", text), 0)
    end
    for i = tonumber(a), tonumber(b) do
      if not seen[i] then seen[i] = true; ids[#ids + 1] = i end
    end
  end
  table.sort(ids)
  return ids
end

local function tracker_addr(o)
  local host, port = o.tracker:match("^([^:]+):(%d+)$")
  return host, tonumber(port)
end

--- run(o): the flow; returns {tasks, tuner, lib, result}
function flow.run(o)
  local tl = require "tunelua"
  local networks = require "networks"
  local relay = require "tunelua.relay"
  local executor = require "tunelua.graph.executor"
  local auto_scheduler = require "tunelua.auto_scheduler"
  local ameasure = require "tunelua.autotvm.measure"
  local tgt = require("tunelua.target").parse(o.target, 0)

  print("Extract tasks...")
  -- o.get_network (a script's own model, e.g. an imported ONNX file) -> mod, params, input
  -- shape, input name; else the named network of networks/, whose input is "data"
  local mod, params, input_shape, input_name
  if o.get_network then
    mod, params, input_shape, input_name = o.get_network()
  else
    mod, params, input_shape = networks.get_network(o.network, { batch_size = o.batch_size, dtype = o.dtype,
      layout = o.layout, image_size = o.image_size })
  end
  input_name = input_name or "data"
  local tasks, weights = auto_scheduler.extract_tasks(mod, params, o.target, { winograd = o.winograd })
  if #tasks == 0 then error(string.format("no search task in %s for %s", o.network, o.target), 0) end
  -- the device's hardware params: a local OpenCL device is asked (in a child process: this
  -- process leaves the device to the measurements until tuning ends); a tracker's device is
  -- not reachable before tuning, so its family's table serves
  local hp
  if tgt.on_device and not o.tracker then
    hp = auto_scheduler.hardware_params_of(o.target, { device = require("tunelua.target").device_id(tgt) or 0 })
  else
    hp = auto_scheduler.hardware_params_of(o.target)
  end
  print("Hardware params: " .. tostring(hp))
  if o.task_ids then
    -- only the chosen tasks are tuned (their IDs stay those of the whole network)
    local all, sub, subw = tasks, {}, {}
    for _, id in ipairs(o.task_ids) do
      if id >= #all then
        error(string.format("--tasks: task %d does not exist (%s has tasks 0 to %d)", id, o.network, #all - 1), 0)
      end
      sub[#sub + 1], subw[#subw + 1] = all[id + 1], weights[id + 1]
    end
    print(string.format("Tuning %d of the %d tasks: %s", #sub, #all, table.concat(o.task_ids, ", ")))
    tasks, weights = sub, subw
  end
  for idx, task in ipairs(tasks) do
    rawset(task, "hardware_params", hp)
    local id = o.task_ids and o.task_ids[idx] or idx - 1
    print(string.format("========== Task %d  (workload key: %s) ==========", id, task.workload_key))
    print(task.compute_dag)
  end

  local n_trial = o.n_trial or 2 * #tasks
  -- the runner of a task: on flushed caches (--cache-flush: every task; the default on CPU
  -- targets: those with FLUSH_BYTES of weights or more), else on warm caches
  local function make_runner(flush)
    local ro = { number = flush and 1 or o.number, ["repeat"] = flush and math.max(o.runner_repeat, 10) or o.runner_repeat,
                 min_repeat_ms = flush and 0 or o.min_repeat_ms, timeout = o.timeout, enable_cpu_cache_flush = flush }
    if o.tracker then
      local host, port = tracker_addr(o)
      return tl.autotvm.RPCRunner(o.key, host, port, ro)
    end
    return ameasure.LocalRunner(ro)
  end
  local runner = make_runner(o.cache_flush == "yes")
  if o.cache_flush == "auto" then
    local names
    runner, names = flow.per_task_runner(tasks, flow.flushed, make_runner(true), runner)
    if #names > 0 then
      print(string.format("Timed on flushed caches (weights of %d MiB or more): %s", flow.FLUSH_BYTES / 2 ^ 20,
                          table.concat(names, ", ")))
    end
  end
  print("Begin tuning...")
  local tuner = auto_scheduler.TaskScheduler(tasks, weights, { strategy = o.strategy,
    load_log_file = (o.resume or io.open(o.log, "r") ~= nil) and o.log or nil })
  local tune_option = auto_scheduler.TuningOptions{
    num_measure_trials = n_trial, num_measures_per_round = o.per_round,
    builder = ameasure.LocalBuilder({ timeout = 15 }), runner = runner,
    measure_callbacks = { auto_scheduler.RecordToFile(o.log) },
  }
  local search_params = o.population and { evolutionary_search_population = o.population,
    sample_init_min_population = math.min(50, math.ceil(o.population / 4)) } or nil
  tuner:tune(tune_option, { program_cost_model = o.model, seed = o.seed, params = search_params })

  print("Compile...")
  local lib = relay.build(mod, { target = o.target, params = params, winograd = o.winograd,
                                 history = auto_scheduler.ApplyHistoryBest(o.log) })
  -- the same network with the default schedules, measured beside it
  local untuned_lib = relay.build(mod, { target = o.target, params = params, winograd = o.winograd,
                                         history = auto_scheduler.ApplyHistoryBest({}),
                                         quiet = true })
  local module, untuned, remote
  if o.tracker then
    print("=============== Request Remote ===============")
    local host, port = tracker_addr(o)
    remote = tl.rpc.request_remote(o.key, host, port, { timeout = 10000 })
    module, untuned = remote:graph_module(lib), remote:graph_module(untuned_lib)
  else
    module, untuned = executor.GraphModule(lib), executor.GraphModule(untuned_lib)
  end
  local data = tl.nd.random_uniform(input_shape, { low = 0, high = 1, seed = 1, dtype = o.dtype })
  module:set_input(input_name, data)
  untuned:set_input(input_name, data)
  print("Evaluate inference time cost...")
  local u = untuned:benchmark({ number = o.bench_number or 1, repeats = o["repeat"],
                                min_repeat_ms = o.min_repeat_ms_e2e, quiet = true })
  local r = module:benchmark({ number = o.bench_number or 1, repeats = o["repeat"],
                               min_repeat_ms = o.min_repeat_ms_e2e })
  print(string.format("Default schedules: %.2f ms (%.2f ms); auto-scheduled: %.2fx of that time", u.mean * 1e3,
                      u.std * 1e3, r.mean / u.mean))
  if remote then remote:close() end
  return { tasks = tasks, tuner = tuner, lib = lib, result = r, untuned = u }
end

--- The scripts' entry point.
function flow.main(argv, defaults, script)
  flow.run(flow.parse_args(argv or {}, defaults, script))
end

return flow
