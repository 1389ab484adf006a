--- tunelua.flow: the whole AutoTVM flow of the tutorials, shared by
--- scripts/tune_mobile_gpu.lua and scripts/tune_relay_x86.lua.
--
--   require("tunelua.flow").main(arg, {target = "llvm", key = "local"})
--
-- Extract the network's tasks, measure each task's untuned config (TopHub's or
-- the template's fallback) as its baseline, tune each with the chosen tuner
-- (every trial appended to the log), keep a tuned config only where it beats
-- the baseline when both are measured again, compile the network with the
-- best records and measure its end-to-end latency against the untuned network
-- in the same run (per task and for the network: untuned, tuned, speedup).
-- Re-running with the same log resumes: configurations already measured are
-- not measured again (every trial is kept in LOG.trials, see flow.keep_trials).
-- With --tracker, tuning measures on the farm, and the compiled network (C or
-- OpenCL) is uploaded to a device of the same key and evaluated there
-- (tunelua.rpc.graph), its outputs checked against a run on this machine.
-- Options come from the command line (see flow.usage); `defaults` holds the
-- script's own.
local flow = {}

flow.defaults = {
  network = "resnet-18",
  target = "opencl -device=mali",
  tuner = "xgb",
  n_trial = 32,
  early_stopping = 16,
  verify_top = 0,         -- tune_tasks' verify_top: re-measure each task's best N (0: off;
                          -- the best one is always re-measured against the untuned baseline)
  log = nil,
  tracker = nil,
  key = "rk3399",
  batch_size = 1,
  dtype = "float32",
  ops = "nn.conv2d",
  image_size = nil,
  ["repeat"] = 30,
  number = 10,
  timeout = 5,
  runner_repeat = nil,    -- LocalRunner/RPCRunner repeat (nil: the runner's default, 3)
  cache_flush = nil,      -- enable_cpu_cache_flush of the runner (CPU targets)
  bench_number = 1,       -- runs per end-to-end measurement
  skip_slower = 10,       -- tune_tasks' skip_slower: leave a template whose untuned config is 10x
                          -- slower than another template's for the same operator untuned
  timeout_factor = 10,    -- tune_tasks' timeout_factor: cut a candidate's runs at 10x the baseline's
  graph_tuner = false,    -- --graph-tuner: autotvm.graph_tuner.DPTuner over the log before the final build
  -- what --tutorial sets (the tutorial's own settings); false = the network's default
  tutorial = { n_trial = 1000, early_stopping = 450, image_size = false, number = 10, timeout = 5,
               ["repeat"] = 30 },
}

flow.usage = [[
usage: tunelua %s [options]
  --network NAME        resnet-18, mobilenet, vgg-16, squeezenet_v1.1, inception_v3 (default %s)
  --target TARGET       default "%s"
  --tuner NAME          xgb, xgb_rank (or xgb-rank), xgb_knob, ..., ga, random, gridsearch
                        (default %s)
  --n-trial N           trials per task (default %d)
  --early-stopping N    stop a task after N trials without improvement (default %d)
  --verify-top N        measure each task's N best configs again in 3 rounds, beside its
                        untuned config, and keep the best median, not a lucky single
                        measurement (default %d: the best one; the untuned config stays
                        unless a tuned one is faster)
  --log FILE            the tuning log (default <key>.<network>.log); re-run to resume
                        (every trial is kept in FILE.trials, the best per task in FILE)
  --tracker HOST:PORT   measure on devices of an RPC tracker (default: this machine)
  --key KEY             device key at the tracker (default %s)
  --ops LIST            operators to tune, comma-separated (default %s)
  --image-size N        input height and width (default %s)
  --repeat N            end-to-end measurements (default %d)
  --number N            runs per measurement of a config (default %d)
  --timeout S           seconds a config may run (default %d)
  --graph-tuner         after kernel tuning, pick one config per conv for the whole network
                        (autotvm.graph_tuner.DPTuner over LOG; writes LOG.graph.log and
                        compiles with it)
  --tutorial            the tutorial's settings:
                        %s
                        (options given explicitly still win)
]]

local function tutorial_str(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    local text = tostring(v)
    if v == false then text = k == "image_size" and "(the network's)" or "none"
    elseif v == math.huge then text = "(the whole space)" end
    parts[#parts + 1] = k .. " " .. text
  end
  return table.concat(parts, ", ")
end

--- Parse argv over a copy of defaults; errors are raised with level 0.
function flow.parse_args(argv, defaults, script)
  local o = {}
  for k, v in pairs(flow.defaults) do o[k] = v end
  for k, v in pairs(defaults or {}) do o[k] = v end
  local i = 1
  local function value(name)
    i = i + 1
    local v = argv[i]
    if v == nil then error(name .. ": expected a value", 0) end
    return v
  end
  local function count(name)
    local v = value(name)
    local n = tonumber(v)
    if not n or n < 0 or n ~= math.floor(n) then
      error(string.format("%s: expected a non-negative integer, got %q", name, v), 0)
    end
    return n
  end
  local strings = { ["--network"] = "network", ["--target"] = "target", ["--tuner"] = "tuner",
    ["--log"] = "log", ["--tracker"] = "tracker", ["--key"] = "key", ["--ops"] = "ops" }
  local counts = { ["--n-trial"] = "n_trial", ["--early-stopping"] = "early_stopping",
    ["--verify-top"] = "verify_top",
    ["--image-size"] = "image_size", ["--repeat"] = "repeat", ["--number"] = "number",
    ["--timeout"] = "timeout" }
  local given, tutorial = {}, false
  while i <= #argv do
    local a = argv[i]
    if strings[a] then o[strings[a]] = value(a); given[strings[a]] = true
    elseif counts[a] then o[counts[a]] = count(a); given[counts[a]] = true
    elseif a == "--tutorial" then tutorial = true
    elseif a == "--graph-tuner" then o.graph_tuner = true
    elseif a == "-h" or a == "--help" then
      io.write(string.format(flow.usage, script or "script.lua", o.network, o.target,
        type(o.tuner) == "string" and o.tuner or "the script's Lua tuner",
        o.n_trial, o.early_stopping, o.verify_top, o.key, o.ops, o.image_size or "the network's", o["repeat"],
        o.number, o.timeout, tutorial_str(o.tutorial or {})))
      os.exit(0)
    else
      error(string.format("unknown option %q (see --help)", a), 0)
    end
    i = i + 1
  end
  if tutorial then
    for k, v in pairs(o.tutorial or {}) do
      if not given[k] then
        if v == false then o[k] = nil else o[k] = v end
      end
    end
  end
  if type(o.tuner) == "string" then
    -- "xgb-rank" is xgb_rank; a script may give a Lua tuner (constructor) in its defaults
    local recipe = require "tunelua.autotvm.recipe"
    local name = recipe.tuner_name(o.tuner)
    if not name then
      error(string.format("--tuner: unknown tuner %q (expected one of %s)", o.tuner,
        table.concat(require("tunelua.autotvm.tuner").NAMES, ", ")), 0)
    end
    o.tuner = name
  end
  if o.tracker and not o.tracker:match("^[^:]+:%d+$") then
    error("--tracker: expected HOST:PORT, got " .. o.tracker, 0)
  end
  o.log = o.log or string.format("%s.%s.log", o.key, o.network)
  return o
end

local function tracker_addr(o)
  local host, port = o.tracker:match("^([^:]+):(%d+)$")
  return host, tonumber(port)
end

local function read_lines(path)
  local lines = {}
  local f = io.open(path, "r")
  if not f then return lines end
  for line in require("tunelua.file").lines(f) do
    if line:match("%S") then lines[#lines + 1] = line end
  end
  f:close()
  return lines
end

--- Keep every trial of the tuning runs in LOG.trials, so that re-running with the same log
--- measures nothing again. tune_tasks resumes from LOG.tmp (a killed run's trials) and LOG;
--- but at the end it keeps only the best record per workload in LOG and removes LOG.tmp,
--- so a re-run after a finished run would measure n_trial - 1 new configs per task.
--- Here: the runner appends each result to LOG.trials as it comes, and before tuning the
--- trials of LOG.trials and LOG.tmp are joined and handed to tune_tasks through LOG.tmp.
function flow.keep_trials(runner, log)
  local record = require "tunelua.autotvm.record"
  local trials, tmp = log .. ".trials", log .. ".tmp"
  local seen, all = {}, {}
  for _, path in ipairs({ trials, tmp }) do
    for _, line in ipairs(read_lines(path)) do
      if not seen[line] then seen[line] = true; all[#all + 1] = line end
    end
  end
  if #all > 0 then
    -- each replaced atomically: a crash leaves the old or the new file, whole
    local file = require "tunelua.file"
    for _, path in ipairs({ trials, tmp }) do file.write_all(path, all) end
  end
  local run = runner.run
  runner.run = function(self, inputs, build_results)
    local results = run(self, inputs, build_results)
    local lines = {}
    for k, inp in ipairs(inputs) do
      if results[k] then lines[#lines + 1] = record.encode(inp, results[k]) end
    end
    require("tunelua.file").append_lines(trials, lines)   -- fsync'd; a write error raises
    return results
  end
end

--- The tuning_option table of the tutorials for options o.
function flow.tuning_option(o)
  local autotvm = require "tunelua.autotvm"
  local runner
  local tgt = require("tunelua.target").parse(o.target, 2)
  if tgt.on_device and not o.tracker then
    -- a local device (OpenCL): configs are measured in forked children by the backend's hook
    -- (docs/measure_opencl.md); this process must not touch the device before tuning ends
    local _ = require("tunelua.autotvm.measure").device_hooks[tgt.backend]
  end
  if o.tracker then
    local host, port = tracker_addr(o)
    runner = autotvm.RPCRunner(o.key, host, port, { number = o.number, timeout = o.timeout,
      ["repeat"] = o.runner_repeat, enable_cpu_cache_flush = o.cache_flush })
  else
    runner = autotvm.LocalRunner({ number = o.number, timeout = o.timeout,
      ["repeat"] = o.runner_repeat, enable_cpu_cache_flush = o.cache_flush })
  end
  flow.keep_trials(runner, o.log)
  return {
    log_filename = o.log,
    tuner = o.tuner,
    n_trial = o.n_trial,
    early_stopping = o.early_stopping,
    verify_top = o.verify_top,
    baseline = true,
    skip_slower = o.skip_slower,
    timeout_factor = o.timeout_factor,
    measure_option = autotvm.measure_option({
      builder = autotvm.LocalBuilder({ timeout = 10 }),
      runner = runner,
    }),
  }
end

--- get_network(o) -> mod, params, input_shape of o.network at o.image_size. A shape error of a
--- too small --image-size (a layer's kernel larger than its input) names the option to change.
function flow.get_network(o)
  if o.get_network then return o.get_network(o) end
  local networks = require "networks"
  local ok, mod, params, input_shape = pcall(networks.get_network, o.network, {
    batch_size = o.batch_size, dtype = o.dtype, image_size = o.image_size,
  })
  if ok then return mod, params, input_shape end
  local msg = tostring(mod):gsub("^[^\n]-%.lua:%d+: ", "")
  if o.image_size and (msg:match("larger than the padded input") or msg:match("larger than the input")) then
    error(string.format("--image-size %d is too small for %s: its layers shrink the input below " ..
      "a kernel's size. Give a larger --image-size (the network's own is %d) or leave the option " ..
      "out.\n(%s)", o.image_size, o.network, o.network == "inception_v3" and 299 or 224, msg), 0)
  end
  error(msg, 0)
end

--- Extract, tune, compile with the best records, evaluate.
function flow.tune_and_evaluate(o, tuning_opt)
  local tl = require "tunelua"
  local autotvm = require "tunelua.autotvm"
  local relay = require "tunelua.relay"

  print("Extract tasks...")
  -- o.get_network (a script's own, e.g. an imported model) may also return the input's name
  local mod, params, input_shape, input_name = flow.get_network(o)
  input_name = input_name or "data"
  local ops = {}
  for op in o.ops:gmatch("[^,%s]+") do ops[#ops + 1] = op end
  local tasks = autotvm.task.extract_from_program(mod, { target = o.target, params = params, ops = ops })
  if #tasks == 0 then
    error(string.format("no tuning task extracted from %s for the ops %s on target '%s': nothing to tune",
                        o.network, table.concat(ops, ","), o.target), 0)
  end

  print("Tuning...")
  local summary = autotvm.tune_tasks(tasks, tuning_opt.measure_option, tuning_opt)
  flow.print_task_table(summary)

  local f = io.open(tuning_opt.log_filename, "r")
  local logged = f and f:read("*l")
  if f then f:close() end
  if not logged then
    error(string.format("nothing measured: the log %s holds no trial", tuning_opt.log_filename), 0)
  end

  local history = autotvm.apply_history_best(tuning_opt.log_filename)
  if o.graph_tuner then
    -- the graph tuner's choice per conv workload (also in LOG.graph.log) wins over LOG's best
    print("Graph tuning...")
    -- every measured config (LOG.trials), not only LOG's best per workload: the tuner weighs
    -- each conv's k best configs against the layout transforms their blocks cost
    local gt = autotvm.graph_tuner.tune_log(mod, { target = o.target, params = params,
                                                   log = tuning_opt.log_filename })
    gt:write_opt_sch2record_file(tuning_opt.log_filename .. ".graph.log")
    gt:pin(history)
  end

  print("Compile...")
  local lib = relay.build(mod, {
    target = o.target, params = params,
    history = history,
  })
  -- the same network with the configs an untuned build takes (TopHub's, else the fallbacks)
  local untuned_lib = relay.build(mod, { target = o.target, params = params, quiet = true })

  local executor = require "tunelua.graph.executor"
  local module, untuned, remote, where
  if o.tracker then
    local host, port = tracker_addr(o)
    if executor.exportable(lib) then
      -- both networks on the device that was tuned for, in one session
      remote = require("tunelua.rpc").request_remote(o.key, host, port, { timeout = 10000 })
      print(string.format("Upload to %s at %s...", remote.key, remote.addr))
      module = remote:graph_module(lib)
      untuned = remote:graph_module(untuned_lib)
      where = string.format(" on %s at %s", remote.key, remote.addr)
    else
      io.stdout:flush()
      io.stderr:write(string.format("note: this %s network cannot be exported: it runs on this " ..
        "machine's device, not on the '%s' device at %s:%d\n", o.target, o.key, host, port))
    end
  end
  module = module or executor.GraphModule(lib)
  untuned = untuned or executor.GraphModule(untuned_lib)
  local data = tl.nd.random_uniform(input_shape, { low = 0, high = 1, seed = 1, dtype = o.dtype })
  module:set_input(input_name, data)
  untuned:set_input(input_name, data)
  if remote then flow.check_remote(module, lib, data, input_name) end

  print("Evaluate inference time cost...")
  local t, u = flow.compare(module, untuned, o.bench_number or 1, o["repeat"])
  print(tostring(t) .. (where or ""))   -- the tuned network: the mean and std dev
  print(string.format("Untuned network: %.2f ms, tuned: %.2f ms (medians of %d runs each, " ..
    "interleaved%s): speedup %.2fx", u.median * 1e3, t.median * 1e3, #t.results, where or "",
    u.median / t.median))
  if remote then remote:close() end
  return { tuned = t, untuned = u, tasks = summary }
end

--- check_remote(remote_module, lib, data): one run of the network on the device and one on this
--- machine on the same input; their outputs must agree (relative to the largest magnitude,
--- 1e-4), else an error. Prints the largest difference.
function flow.check_remote(remote_module, lib, data, input_name)
  local ffi = require "ffi"
  local here = require("tunelua.graph.executor").GraphModule(lib)
  here:set_input(input_name or "data", data)
  here:run()
  remote_module:run()
  local a, b = remote_module:get_output(0), here:get_output(0)
  local ct = ({ float32 = "float *", float64 = "double *" })[b:dtype()]
  if not ct then   -- other dtypes: the bytes must be equal
    if ffi.string(a:data_ptr(), a:nbytes()) ~= ffi.string(b:data_ptr(), b:nbytes()) then
      error("the network's output on " .. remote_module.device .. " differs from this machine's", 0)
    end
    return
  end
  local n = a:nbytes() / ffi.sizeof(ct:sub(1, -3))
  local pa, pb = ffi.cast(ct, a:data_ptr()), ffi.cast(ct, b:data_ptr())
  local diff, big = 0, 0
  for i = 0, n - 1 do
    diff = math.max(diff, math.abs(pa[i] - pb[i]))
    big = math.max(big, math.abs(pb[i]))
  end
  if not (diff <= 1e-4 * math.max(big, 1e-30)) then
    error(string.format("the network's output on %s differs from this machine's: largest " ..
      "difference %.3g (largest magnitude %.3g)", remote_module.device, diff, big), 0)
  end
  print(string.format("Output on %s matches this machine's run (largest difference %.3g)",
    remote_module.device, diff))
end

--- compare(a, b, number, repeats) -> the benchmark results of graph modules a and b, measured
--- in turns (one warm-up run each, then a, b, a, b, ...) so that a slower or busier moment of
--- the machine falls on both alike. Each result: {mean, median, std, results}.
function flow.compare(a, b, number, repeats)
  a:benchmark({ number = 1, repeats = 1, quiet = true })
  b:benchmark({ number = 1, repeats = 1, quiet = true })
  local ra, rb = {}, {}
  for i = 1, repeats do
    ra[i] = a:benchmark({ number = number, repeats = 1, quiet = true }).mean
    rb[i] = b:benchmark({ number = number, repeats = 1, quiet = true }).mean
  end
  local bench_result = require("tunelua.graph.executor").bench_result
  return bench_result(ra), bench_result(rb)
end

--- print_task_table(summary): per task of tune_tasks' summary, the untuned and tuned latency
--- (medians of the verification rounds) and the speedup; tasks not tuned say why.
function flow.print_task_table(summary, out)
  out = out or io.stdout
  local w = 4
  for _, e in ipairs(summary) do w = math.max(w, #tostring(e.name)) end
  out:write(string.format("%-3s  %-" .. w .. "s  %12s  %12s  %8s\n", "#", "task", "untuned ms",
    "tuned ms", "speedup"))
  for i, e in ipairs(summary) do
    local b = e.baseline
    if e.untuned_cost then
      out:write(string.format("%-3d  %-" .. w .. "s  %12.4f  %12.4f  %7.2fx\n", i, e.name,
        e.untuned_cost * 1e3, e.tuned_cost * 1e3, e.untuned_cost / e.tuned_cost))
    else
      local why = e.skipped and ("not tuned: " .. e.skipped)
                  or (b and b.error_no ~= 0) and ("untuned config failed (error " .. b.error_no .. ")")
                  or "no successful measurement"
      out:write(string.format("%-3d  %-" .. w .. "s  %s\n", i, e.name, why))
    end
  end
end

--- The scripts' entry point.
function flow.main(argv, defaults, script)
  local o = flow.parse_args(argv or {}, defaults, script)
  flow.tune_and_evaluate(o, flow.tuning_option(o))
  -- a picture of the run, from every trial (LOG keeps only the best record per task)
  local trials = o.log .. ".trials"
  local f = io.open(trials, "r")
  if f then f:close() else trials = o.log end
  print("Plot: " .. require("tunelua.log_cli").plot(trials, o.log .. ".png"))
end

return flow
