-- The int8 network against the float network on random inputs: top-1 agreement and the
-- relative error of the logits (||q - f|| / ||f|| per input; mean, min, max), for the
-- quantization the VTA tutorial uses (docs/vta_network.md).
--
--   tunelua scripts/quantize_report.lua [--network resnet18_v1] [--inputs 16]
--       [--image-size 224] [--global-scale 8] [--init xavier|he] [--seed 0] [--packed] [--vta]
--       [--store-lowbit-output true|false]
--
-- Weights are random (networks' initialization rules; no trained weights are downloaded),
-- inputs U(-1, 1). --packed also runs the network graph_pack'ed for the default VTA
-- configuration (tunelua.vta.get_env()) and counts the inputs whose
-- logits differ from the unpacked int8 network's in any bit (expected: 0); --vta does the
-- same with every packed conv group on vta-sim (the executor's VTA groups, config 0).
-- --store-lowbit-output false keeps a residual add's operands in int32 (the default stores
-- the residual as int8, as VTA needs).
local nd = require "tunelua.nd"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"
local executor = require "tunelua.graph.executor"
local testing = require "tunelua.testing"

local o = { network = "resnet18_v1", inputs = 16, image_size = 224, global_scale = 8,
            init = "xavier", seed = 0, packed = false, vta = false, store_lowbit_output = "true" }
local i = 1
while arg and arg[i] do
  local a = arg[i]
  local key = a:match("^%-%-([%w%-]+)$")
  if not key then error("quantize_report: unexpected argument '" .. a .. "'", 0) end
  key = key:gsub("%-", "_")
  if key == "packed" or key == "vta" then
    o[key] = true
    i = i + 1
  elseif o[key] == nil then
    error("quantize_report: unknown option --" .. key:gsub("_", "-") .. " (expected --network, " ..
          "--inputs, --image-size, --global-scale, --init, --seed, --packed, --vta, " ..
          "--store-lowbit-output)", 0)
  else
    local v = arg[i + 1]
    if v == nil then error("quantize_report: --" .. key:gsub("_", "-") .. " needs a value", 0) end
    if type(o[key]) == "number" then
      v = tonumber(v)
      if not v then error("quantize_report: --" .. key:gsub("_", "-") .. " needs a number", 0) end
    end
    o[key] = v
    i = i + 2
  end
end

local mod, params, ishape = networks.get_network(o.network, { image_size = o.image_size,
                                                             init = o.init, seed = o.seed })
if o.store_lowbit_output ~= "true" and o.store_lowbit_output ~= "false" then
  error("quantize_report: --store-lowbit-output expects true or false, got '" .. o.store_lowbit_output .. "'", 0)
end
local cfg = quantize.qconfig { global_scale = o.global_scale, skip_conv_layers = { 0 },
                               store_lowbit_output = o.store_lowbit_output == "true" }
local qmod, info = quantize.quantize(mod, params, cfg)
local nq = 0
for _, c in ipairs(info.convs) do if c.quantized then nq = nq + 1 end end
local fm = executor.GraphModule(executor.build(mod, { target = "llvm", params = params, quiet = true }))
local qm = executor.GraphModule(executor.build(qmod, { target = "llvm", quiet = true }))
local env = require("tunelua.vta").get_env()
local pmod = (o.packed or o.vta) and graph_pack.graph_pack(qmod, { env = env })
local pm = o.packed and executor.GraphModule(executor.build(pmod, { target = "llvm", quiet = true }))
local vlib = o.vta and executor.build(pmod, { target = "llvm", quiet = true, vta = { env = env } })
local vm = vlib and executor.GraphModule(vlib)
print(string.format("%s %dx%d, init %s, %s: %d of %d convs int8", o.network, o.image_size,
                    o.image_size, o.init, tostring(cfg):match("global_scale=[^,]+"), nq, #info.convs))
local agree, sum, lo, hi, differ, vdiffer = 0, 0, math.huge, 0, 0, 0
for s = 1, o.inputs do
  local x = nd.random_uniform(ishape, { seed = 1000 + s, low = -1, high = 1 })
  fm:set_input("data", x); fm:run()
  qm:set_input("data", x); qm:run()
  local a, b = fm:get_output(0):flat(), qm:get_output(0):flat()
  local same, e = testing.compare_logits(a, b)
  if same then agree = agree + 1 end
  sum, lo, hi = sum + e, math.min(lo, e), math.max(hi, e)
  if pm then
    pm:set_input("data", x); pm:run()
    local c = pm:get_output(0):flat()
    for k = 1, #b do if b[k] ~= c[k] then differ = differ + 1 break end end
  end
  if vm then
    vm:set_input("data", x); vm:run()
    local c = vm:get_output(0):flat()
    for k = 1, #b do if b[k] ~= c[k] then vdiffer = vdiffer + 1 break end end
  end
end
print(string.format("top-1 agreement %d/%d; relative logits error mean %.4f (min %.4f, max %.4f)",
                    agree, o.inputs, sum / o.inputs, lo, hi))
if pm then
  print(string.format("packed vs unpacked int8: %d of %d inputs differ in any bit", differ, o.inputs))
end
if vm then
  print(string.format("VTA (%d packed conv groups on vta-sim) vs unpacked int8 on the CPU: %d of %d inputs differ in any bit",
                      #vlib.vta_kernels, vdiffer, o.inputs))
end
