--- Resident memory of a network's inference on the host CPU: tunelua against PyTorch, same run
--- (issue figures: "peak memory of resnet-50 inference against PyTorch's").
--
--   tunelua scripts/bench/memory_cpu.lua [--networks resnet-50,resnet-18,...] [--repeat 5]
--        [--threads 2] [--python /usr/bin/python3]
--
-- Each side runs in a process of its own per network (this script re-runs itself with --child
-- for tunelua; scripts/bench/torch_peer.py --memory for PyTorch), and reads /proc/self/status:
--   base   resident memory once the runtime is loaded (tunelua's modules; torch imported)
--   ready  above base once the network is built and its weights are in memory, before any
--          inference (tunelua: executor.build with TopHub's records, the GraphModule made,
--          the caller's parameter arrays dropped and garbage collected)
--   peak   the high-water mark above base over --repeat inferences, the mark reset at ready
--          (Linux: 5 written to /proc/self/clear_refs)
-- and, for tunelua, the executor's own plan (lib:memory(): the planned arena of the
-- intermediate tensors, the sum of all intermediates, the deployed weights, inputs and
-- outputs; docs/executor.md). MiB throughout.
local opts = { networks = "resnet-50", ["repeat"] = 5, threads = 2, python = "/usr/bin/python3", child = nil }
do
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    local k = a:match("^%-%-([%w]+)$")
    if not k or opts[k] == nil and k ~= "child" then
      error("memory_cpu: unknown option " .. tostring(a) .. " (see the header of this script)", 0)
    end
    if v == nil then error("memory_cpu: " .. a .. " expects a value", 0) end
    opts[k] = (k == "repeat" or k == "threads") and tonumber(v) or v
    i = i + 2
  end
end

local function status_kb(key)
  local f = assert(io.open("/proc/self/status", "r"))
  local s = f:read("*a")
  f:close()
  return tonumber(s:match(key .. ":%s*(%d+)"))
end

local MiB = 2 ^ 20

if opts.child then
  -- the tunelua side, in a process of its own
  local tl = require "tunelua"
  local executor = require "tunelua.graph.executor"
  local networks = require "networks"
  local json = require "tunelua.json"
  tl.set_num_threads(opts.threads)
  collectgarbage("collect")
  local base = status_kb("VmRSS")
  local mod, params = networks.get_network(opts.child, { batch_size = 1 })
  local lib = executor.build(mod, { target = "llvm", params = params, tophub = true, quiet = true })
  local m = executor.GraphModule(lib)
  local shape = mod.main.params[1].type.shape
  local x = tl.nd.random_uniform(shape, { seed = 1 })
  params, mod = nil, nil
  collectgarbage("collect")
  collectgarbage("collect")
  local ready = status_kb("VmRSS")
  local f = io.open("/proc/self/clear_refs", "w")
  local reset = f and f:write("5") and f:close()
  for _ = 1, opts["repeat"] do
    m:set_input("data", x)
    m:run()
  end
  local peak = status_kb("VmHWM")
  local plan = lib:memory()
  print(json.encode({ base_mib = base / 1024, ready_mib = (ready - base) / 1024,
                      peak_mib = reset and (peak - base) / 1024 or json.null,
                      plan_planned_mib = plan.planned / MiB, plan_intermediates_mib = plan.intermediates / MiB,
                      plan_weights_mib = plan.weights / MiB, plan_io_mib = plan.io / MiB,
                      plan_peak_mib = plan.peak / MiB, plan_total_mib = plan.total / MiB }))
  os.exit(0)
end

local json = require "tunelua.json"
local function script_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/[^/]*$") or "."
end
local function run_json(cmd, who)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  local line = out:match("(%b{})%s*$")
  local ok, v = pcall(json.decode, line or "")
  if not ok or type(v) ~= "table" then
    io.stderr:write(string.format("memory_cpu: %s gave no figures: %s\n", who, out:gsub("\n", " ")))
    return nil
  end
  return v
end
local exe = arg[-1] or "tunelua"
local function f1(x) return type(x) == "number" and string.format("%.1f", x) or "n/a" end

print(string.format("resident memory, batch 1, fp32, %d threads, %d inferences; MiB (above each process's base)",
                    opts.threads, opts["repeat"]))
print(string.format("%-13s %8s %8s %8s %8s %8s %8s | %8s %8s %8s %8s", "network", "planned", "weights", "plan",
                    "all own", "ready", "peak", "PT wts", "PT rdy", "PT peak", "PT/ours"))
for name in opts.networks:gmatch("[^,]+") do
  local ours = run_json(string.format("%s %s/memory_cpu.lua --child %s --repeat %d --threads %d", exe,
                                      script_dir(), name, opts["repeat"], opts.threads), "tunelua " .. name)
  local pt = run_json(string.format("%s %s/torch_peer.py --network %s --memory --repeat %d --threads %d",
                                    opts.python, script_dir(), name, opts["repeat"], opts.threads), "PyTorch " .. name)
  local ratio = ours and pt and type(ours.peak_mib) == "number" and type(pt.peak_mib) == "number"
                and string.format("%.2f", pt.peak_mib / ours.peak_mib) or "n/a"
  print(string.format("%-13s %8s %8s %8s %8s %8s %8s | %8s %8s %8s %8s", name,
                      f1(ours and ours.plan_planned_mib), f1(ours and ours.plan_weights_mib),
                      f1(ours and ours.plan_peak_mib), f1(ours and ours.plan_total_mib),
                      f1(ours and ours.ready_mib), f1(ours and ours.peak_mib),
                      f1(pt and pt.weights_mib), f1(pt and pt.ready_mib), f1(pt and pt.peak_mib), ratio))
end
print("planned: the executor's arena for intermediates; weights: as deployed (packed); plan: planned +"
      .. " weights + io;\nall own: every tensor in a buffer of its own; ready/peak: measured resident memory"
      .. " (see the header); PT: PyTorch")
