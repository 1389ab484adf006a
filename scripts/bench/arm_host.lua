--- The x86 host build of the arm_cpu artifact against PyTorch, same run (docs/arm.md,
--- "Benchmark"). The network is compiled with the arm_cpu templates and strategy for this host
--- ("llvm -device=arm_cpu -mtriple=x86_64-linux-gnu": the same schedules and configs as for the
--- board, compiled by the host compiler), exported with lib:export_library as the .tlpack a
--- device would load, and timed three ways: the exported file with the device runtime
--- (build/tunelua-run: device/runtime.c, no libtunelua), the same build in this process
--- (GraphModule), and PyTorch on the same network (scripts/bench/torch_peer.py).
--
--   tunelua scripts/bench/arm_host.lua                         -- resnet-18, 224x224, fallback configs
--   tunelua scripts/bench/arm_host.lua --tophub                -- also TopHub's rk3399 configs
--   tunelua scripts/bench/arm_host.lua --log arm.log           -- also a tuned log's best configs
--   tunelua scripts/bench/arm_host.lua --network mobilenet --threads 2 --repeat 30 --rounds 5
--
-- Batch 1, fp32. Every column is timed in --rounds interleaved rounds (--repeat runs in all),
-- so that a load change on the machine hits every column alike; the figures are medians over
-- all runs (PyTorch: the median of its per-round medians). --threads sets tunelua's pool, the
-- device runtime's (TUNELUA_NUM_THREADS) and PyTorch's. --python: /usr/bin/python3 (Debian's
-- python3-torch).
local tl = require "tunelua"
local executor = require "tunelua.graph.executor"
local autotvm = require "tunelua.autotvm"
local file = require "tunelua.file"
local stats = require "tunelua.stats"
local networks = require "networks"

local opts = { network = "resnet-18", image_size = 224, threads = 2, ["repeat"] = 20, rounds = 5,
               python = "/usr/bin/python3", log = nil, tophub = false,
               target = "llvm -device=arm_cpu -model=rk3399 -mtriple=x86_64-linux-gnu" }
do
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    if a == "--tophub" then opts.tophub = true; i = i + 1
    else
      if v == nil then error("arm_host: " .. a .. " expects a value", 0) end
      if a == "--network" then opts.network = v
      elseif a == "--image-size" then opts.image_size = tonumber(v)
      elseif a == "--threads" then opts.threads = tonumber(v)
      elseif a == "--repeat" then opts["repeat"] = tonumber(v)
      elseif a == "--rounds" then opts.rounds = tonumber(v)
      elseif a == "--python" then opts.python = v
      elseif a == "--log" then opts.log = v
      elseif a == "--target" then opts.target = v
      else error("arm_host: unknown option " .. tostring(a) .. " (see the header of this script)", 0) end
      i = i + 2
    end
  end
end
tl.set_num_threads(opts.threads)

local function script_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/[^/]*$") or "."
end
local RUN = (os.getenv("TUNELUA_BUILD_DIR") or (script_dir() .. "/../../build")) .. "/tunelua-run"
assert(io.open(RUN), RUN .. " not built (make)")
local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tl-armhost")

local mod, params, ishape = networks.get_network(opts.network, { batch_size = 1, image_size = opts.image_size })
ishape = ishape or mod.main.params[1].type.shape
local x = tl.nd.random_uniform(ishape, { seed = 1 })
local inpath = dir .. "/input.bin"
do
  local f = assert(io.open(inpath, "wb"))
  f:write(require("ffi").string(x:data_ptr(), x:numel() * 4))
  f:close()
end

-- one column per config source: the build in this process and its exported pack
local cols = {}
local function add(name, history, tophub)
  local lib = executor.build(mod, { target = opts.target, params = params, history = history,
                                    tophub = tophub, quiet = true })
  local pack = string.format("%s/%s.tlpack", dir, name)
  lib:export_library(pack)
  local m = executor.GraphModule(lib)
  m:set_input("data", x)
  m:run()
  cols[#cols + 1] = { name = name, pack = pack, m = m, run_ms = {}, twin_ms = {} }
end
add("fallback", nil, false)
if opts.tophub then add("tophub", nil, true) end
if opts.log then add("tuned", autotvm.apply_history_best(opts.log), true) end

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

local per = math.max(1, math.floor(opts["repeat"] / opts.rounds))
local torch_ms, torch_ver, torch_err = {}, nil, nil
for _ = 1, opts.rounds do
  for _, c in ipairs(cols) do
    local out = sh(string.format("TUNELUA_NUM_THREADS=%d %s %s %s -n 1 -r %d --top 1", opts.threads,
                                 RUN, c.pack, inpath, per))
    local med = out:match("median: ([%d%.]+) ms")
    assert(med, "tunelua-run: " .. out)
    c.run_ms[#c.run_ms + 1] = tonumber(med)
    local r = c.m:benchmark({ number = 1, repeats = per, quiet = true })
    for _, s in ipairs(r.results) do c.twin_ms[#c.twin_ms + 1] = s * 1e3 end
  end
  local out = sh(string.format("%s %s/torch_peer.py --network %s --threads %d --repeat %d", opts.python,
                               script_dir(), opts.network, opts.threads, per))
  local med = out:match('"median_ms": ([%d%.e%-]+)')
  if med then
    torch_ms[#torch_ms + 1] = tonumber(med)
    torch_ver = out:match('"version": "([^"]+)"')
  else
    torch_err = out:gsub("\n", " ")
  end
end
file.remove(dir)

local torch = #torch_ms > 0 and stats.median(torch_ms) or nil
print(string.format("%s %dx%d, batch 1, fp32, %d threads, target '%s'; medians of %d runs in %d rounds",
                    opts.network, opts.image_size, opts.image_size, opts.threads, opts.target,
                    per * opts.rounds, opts.rounds))
print("| configs | tunelua-run (.tlpack) | GraphModule (same build) | PyTorch " .. (torch_ver or "") ..
      " | PyTorch / tunelua-run |")
print("| --- | --- | --- | --- | --- |")
for _, c in ipairs(cols) do
  local run, twin = stats.median(c.run_ms), stats.median(c.twin_ms)
  print(string.format("| %s | %.2f ms | %.2f ms | %s | %s |", c.name, run, twin,
                      torch and string.format("%.2f ms", torch) or "n/a",
                      torch and string.format("%.2f", torch / run) or "n/a"))
end
if not torch then print("PyTorch did not run: " .. tostring(torch_err)) end
-- the spread: each round's median (a shared machine's load moves them all)
local function rounds(xs) local t = {} for i, v in ipairs(xs) do t[i] = string.format("%.1f", v) end return table.concat(t, " ") end
for _, c in ipairs(cols) do print(string.format("rounds, %s tunelua-run: %s ms", c.name, rounds(c.run_ms))) end
if torch then print(string.format("rounds, PyTorch: %s ms", rounds(torch_ms))) end
