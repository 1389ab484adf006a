--- Import an ONNX model (e.g. exported from PyTorch), tune its tasks, compile and run it.
--
--   tunelua scripts/tune_onnx.lua resnet18.onnx --input input:1x3x224x224
--   tunelua scripts/tune_onnx.lua model.onnx --input x:1x3x96x96 --tuner random --n-trial 16
--   tunelua scripts/tune_onnx.lua model.onnx --target "opencl -device=mali" --tracker HOST:9190 --key rk3399
--   tunelua scripts/tune_onnx.lua model.onnx --auto-scheduler --n-trial 64   -- auto-scheduled
--
-- MODEL.onnx is imported by relay.frontend.from_onnx (docs/onnx.md); --input NAME:DIMS gives an
-- input's shape (needed where the model's is dynamic; repeat it for several inputs). Then the
-- flow of scripts/tune_relay_x86.lua (tunelua.flow; the same options, --help lists them):
-- extract the AutoTVM tasks of --ops, tune each with --tuner, compile with the best records,
-- run on random input and print the mean inference time against the untuned network.
-- --auto-scheduler runs the auto-scheduler's flow instead (tunelua.auto_scheduler.flow, the
-- options of scripts/tune_network_x86.lua): its search tasks, the task scheduler over
-- --n-trial (default 2 per task) into --log, the network compiled with ApplyHistoryBest and
-- timed beside the same network on default schedules.
local flow = require "tunelua.flow"

local USAGE = [[
usage: tunelua scripts/tune_onnx.lua MODEL.onnx [--input NAME:DIMS ...] [--auto-scheduler] [options]
  MODEL.onnx            an ONNX model file (e.g. torch.onnx.export's)
  --input NAME:DIMS     the shape of input NAME, e.g. input:1x3x224x224 (where the model's is
                        dynamic; repeatable)
  --auto-scheduler      tune with the auto-scheduler (its options: scripts/tune_network_x86.lua
                        --help) instead of AutoTVM
and the options of the tuning flow (tunelua.flow):
]]

local argv, model, shapes, ansor = {}, nil, {}, false
local i = 1
local function die(msg)
  io.stderr:write("tune_onnx: " .. msg .. "\n")
  os.exit(2)
end
while i <= #arg do
  local a = arg[i]
  if a == "--input" then
    local v = arg[i + 1] or die("--input: expected NAME:DIMS, e.g. input:1x3x224x224")
    local name, dims = v:match("^(.+):([%dx]+)$")
    if not name then die(string.format("--input: expected NAME:DIMS (e.g. input:1x3x224x224), got %q", v)) end
    local t = {}
    for d in dims:gmatch("%d+") do t[#t + 1] = tonumber(d) end
    shapes[name] = t
    i = i + 1
  elseif a == "--auto-scheduler" then
    ansor = true
  elseif a == "-h" or a == "--help" then
    io.write(USAGE)
    argv[#argv + 1] = a
  elseif not a:match("^%-") and not model and (i == 1 or not arg[i - 1]:match("^%-%-")) then
    model = a
  else
    argv[#argv + 1] = a
  end
  i = i + 1
end
if not model and not (argv[1] == "-h" or argv[1] == "--help") then
  die("no model given\n" .. USAGE:gsub("\nand the options.*", ""))
end

local network = model and (model:match("([^/]+)$"):gsub("%.onnx$", "")) or "model"

-- the imported model as the flow's network: mod, params, input shape, input name
local function get_network()
  local relay = require "tunelua.relay"
  local t0 = os.clock()
  local mod, params = relay.frontend.from_onnx(model, { shape = shapes })
  local inputs = {}
  for _, p in ipairs(mod.main.params) do if params[p.name] == nil then inputs[#inputs + 1] = p end end
  if #inputs ~= 1 then
    local names = {}
    for k, p in ipairs(inputs) do names[k] = p.name end
    error(string.format("%s has %d inputs (%s): the flow feeds one random input", model, #inputs,
                        table.concat(names, ", ")), 0)
  end
  local nparams, nbytes = 0, 0
  for _, v in pairs(params) do nparams = nparams + 1; nbytes = nbytes + v:nbytes() end
  print(string.format("Imported %s: input %s %s, %d params (%.1f MB), output %s (%.2f s)", model,
    inputs[1].name, relay.ops.shape_str(inputs[1].type.shape), nparams, nbytes / 1e6,
    relay.type_str(mod.main.body.type), os.clock() - t0))
  return mod, params, inputs[1].type.shape, inputs[1].name
end

if ansor then
  -- the auto-scheduler's flow (tunelua.auto_scheduler.flow) on the imported model: tasks,
  -- the task scheduler over --n-trial (default 2 per task), ApplyHistoryBest, the time
  local aflow = require "tunelua.auto_scheduler.flow"
  local o = aflow.parse_args(argv, { target = "llvm", key = "local", network = network, layout = "NCHW" },
                             "scripts/tune_onnx.lua --auto-scheduler")
  o.get_network = get_network
  aflow.run(o)
  return
end

require("tunelua.flow").main(argv, {
  target = "llvm",
  key = "local",
  network = network,
  ops = "nn.conv2d,nn.dense",
  number = 4,
  ["repeat"] = 10,
  get_network = get_network,
  tutorial = { tuner = "random", n_trial = math.huge, early_stopping = false, image_size = false,
               number = 1, runner_repeat = 10, cache_flush = true, bench_number = 100,
               ["repeat"] = 3 },
}, "scripts/tune_onnx.lua")
