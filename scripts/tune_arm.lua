--- Tune a network for an ARM CPU board or phone, export it and run it on the device (the flow of
--- the ARM tutorials: seeds 000 and 004).
--
--   tunelua scripts/tune_arm.lua --tracker 127.0.0.1:9190 --key rk3399      -- tune on the device
--   tunelua scripts/tune_arm.lua --n-trial 0                                 -- no tuning: TopHub's
--                                                                            -- configs, else fallbacks
--   tunelua scripts/tune_arm.lua --network mobilenet --image-size 64 --export mobilenet.tlpack
--   tunelua scripts/tune_arm.lua --onnx model.onnx --input-shape 1,3,224,224   -- an ONNX model
--
-- 1. the network's conv2d and dense tasks for the arm_cpu strategy (spatial pack, winograd for
--    3x3 stride-1 convs, depthwise; TopHub's arm_cpu_v0.08 package applies to -model=rk3399 ...);
-- 2. with --tracker, each task tuned on a device of --key: kernels cross compiled here
--    (aarch64-linux-gnu-gcc), measured on the device's tunelua-rpc (docs/arm.md); every trial
--    goes to the log, a re-run with the same log resumes, and a trial whose device died is
--    measured again on the next device (RPCRunner lost_retries);
-- 3. the network compiled with the best records (a cross build: a host twin runs here) and
--    exported as one file (lib:export_library: kernels, graph, params);
-- 4. the file run on the device by tunelua-run (--device-run: the command that runs it there;
--    by default qemu-aarch64 with build/aarch64/tunelua-run) on a random image, its output
--    checked against the host twin's, its top classes and time printed.
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local networks = require "networks"
local nd = require "tunelua.nd"
local ffi = require "ffi"

local o = {
  network = "resnet-18", image_size = nil, target = "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon",
  tracker = nil, key = "rk3399", n_trial = 32, early_stopping = 16, tuner = "xgb", log = nil,
  export = nil, device_run = nil, number = 4, ["repeat"] = 3, timeout = 30, run = true,
  onnx = nil, input_shape = nil,
}
local usage = [[
usage: tunelua scripts/tune_arm.lua [options]
  --network NAME      resnet-18, mobilenet, vgg-16, squeezenet_v1.1 ... (default resnet-18)
  --image-size N      input height and width (default the network's)
  --onnx FILE         an ONNX model instead of --network (relay.frontend.from_onnx)
  --input-shape DIMS  its first input's shape when the model leaves it open, e.g. 1,3,224,224
  --target TARGET     default "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon"
  --tracker HOST:PORT tune on devices of --key registered there (tunelua-rpc); without it, no tuning
  --key KEY           the devices' key (default rk3399)
  --n-trial N         trials per task (default 32; 0: no tuning)
  --early-stopping N  stop a task after N trials without improvement (default 16)
  --tuner NAME        xgb, xgb_rank, ga, random, gridsearch (default xgb)
  --log FILE          the tuning log (default NETWORK.arm.log)
  --export FILE       the exported network (default NETWORK.tlpack)
  --device-run CMD    the command running tunelua-run on the device (default: qemu-aarch64 -L
                      /usr/aarch64-linux-gnu build/aarch64/tunelua-run for an aarch64 target)
  --no-run            export only
]]
local i = 1
while i <= #arg do
  local a, v = arg[i], arg[i + 1]
  local name = a:match("^%-%-([%w-]+)$")
  if a == "--help" or a == "-h" then io.write(usage) os.exit(0) end
  if a == "--no-run" then o.run = false; i = i + 1
  elseif not name or v == nil then io.stderr:write("tune_arm: bad option '" .. a .. "'\n" .. usage) os.exit(2)
  else
    local key = name:gsub("-", "_")
    if o[key] == nil and key ~= "image_size" and key ~= "tracker" and key ~= "log" and key ~= "export"
       and key ~= "device_run" and key ~= "onnx" and key ~= "input_shape" then
      io.stderr:write("tune_arm: unknown option '" .. a .. "'\n" .. usage) os.exit(2)
    end
    o[key] = (type(o[key]) == "number" or key == "image_size") and tonumber(v) or v
    if (type(o[key]) == "nil") then io.stderr:write("tune_arm: " .. a .. " expects a number\n") os.exit(2) end
    i = i + 2
  end
end
local name = o.onnx and (o.onnx:match("([^/]+)%.onnx$") or "model") or o.network
o.log = o.log or (name .. ".arm.log")
o.export = o.export or (name .. ".tlpack")

print("Extract tasks...")
local mod, params
if o.onnx then
  local shape
  if o.input_shape then
    local dims = {}
    for d in o.input_shape:gmatch("%d+") do dims[#dims + 1] = tonumber(d) end
    local onnx = require "tunelua.onnx"
    local first = onnx.load_model(o.onnx).inputs[1]
    shape = { [first.name] = dims }
  end
  mod, params = relay.frontend.from_onnx(o.onnx, { shape = shape })
else
  mod, params = networks.get_network(o.network, { image_size = o.image_size })
end
local tasks = autotvm.task.extract_from_program(mod, { target = o.target, params = params,
                                                       ops = { "nn.conv2d", "nn.dense" } })
for k, t in ipairs(tasks) do print(string.format("  task %2d  %s  (%d configs)", k, t.name, #t.config_space)) end

if o.tracker and o.n_trial > 0 then
  local host, port = o.tracker:match("^(.*):(%d+)$")
  if not host then error("--tracker expects HOST:PORT, got '" .. o.tracker .. "'", 0) end
  print(string.format("Tuning on devices of key '%s' at %s...", o.key, o.tracker))
  local summary = autotvm.tune_tasks(tasks, autotvm.measure_option({
    builder = autotvm.LocalBuilder({ timeout = 60 }),
    runner = autotvm.RPCRunner(o.key, host, tonumber(port), { number = o.number, ["repeat"] = o["repeat"],
      timeout = o.timeout, lost_retries = 2, check_correctness = false }),
  }), { tuner = o.tuner, n_trial = o.n_trial, early_stopping = o.early_stopping, log_filename = o.log })
  for _, s in ipairs(summary) do
    print(string.format("  %-40s %4d trials  best %.2f GFLOPS", s.name, s.trials or 0, (s.best_flops or 0) / 1e9))
  end
else
  print("No tuning (give --tracker HOST:PORT --key KEY and --n-trial N > 0 to tune on a device)")
end

print("Compile...")
local fh = io.open(o.log, "r")
local history = fh and (fh:close() or true) and autotvm.apply_history_best(o.log) or nil
local lib = relay.build(mod, { target = o.target, params = params, history = history })
lib:export_library(o.export)
print("Exported " .. o.export)
if not o.run then return end

-- the device run: tunelua-run on a random image; the host twin's output is the reference
local arch = executor.target_arch(require("tunelua.target").parse(o.target))
local cmd = o.device_run
if not cmd then
  local host_arch = ({ x64 = "x86_64", arm64 = "aarch64" })[jit.arch] or jit.arch
  cmd = arch == host_arch and "build/tunelua-run"
        or (arch == "aarch64" and "qemu-aarch64 -L /usr/aarch64-linux-gnu build/aarch64/tunelua-run")
  if not cmd then error("no default way to run " .. arch .. " code here: give --device-run", 0) end
end
local iname = lib.input_order[1]
local x = nd.random_uniform(lib.inputs[iname].shape, { seed = 1, low = 0, high = 1 })
local xin, yout = os.tmpname(), os.tmpname()
local f = assert(io.open(xin, "wb"))
f:write(ffi.string(x:data_ptr(), x:nbytes()))
f:close()
print("Run on the device: " .. cmd)
local p = io.popen(string.format("%s %s %s -o %s -n 1 -r 3 2>&1; echo \"__rc=$?\"", cmd, o.export, xin, yout))
local out = p:read("*a")
p:close()
io.write((out:gsub("__rc=%d+%s*$", "")))
if not out:match("__rc=0%s*$") then os.remove(xin) os.remove(yout) error("the device run failed", 0) end
local m = executor.GraphModule(lib)
m:set_input(iname, x)
m:run()
local want = m:get_output(0)
local got = assert(io.open(yout, "rb")):read("*a")
os.remove(xin)
os.remove(yout)
assert(#got == want:nbytes(), "the device's output has the wrong size")
local pw, pg = ffi.cast("float *", want:data_ptr()), ffi.cast("const float *", got)
local maxd, maxv = 0, 0
for k = 0, want:nbytes() / 4 - 1 do
  maxd = math.max(maxd, math.abs(pw[k] - pg[k]))
  maxv = math.max(maxv, math.abs(pw[k]))
end
print(string.format("Device output vs this machine's: largest difference %.3g (largest value %.3g)", maxd, maxv))
if maxd > 1e-3 * math.max(1, maxv) then error("the device's output differs from this machine's", 0) end
